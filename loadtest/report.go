package loadtest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is a whole comparison, with what it takes to reproduce it.
type Report struct {
	Command string  `json:"command"`
	Machine Machine `json:"machine"`
	Date    string  `json:"date"`
	Config  Config  `json:"config"`
	Rows    []Row   `json:"rows"`
}

// Machine says where the numbers were measured.
type Machine struct {
	Host string `json:"host"`
	OS   string `json:"os"`
	CPUs int    `json:"cpus"`
	CPU  string `json:"cpu"`
	Go   string `json:"go"`
}

// Row is one mode's outcome.
type Row struct {
	Mode      string `json:"mode"`
	Requests  int    `json:"requests"`
	Accepted  int    `json:"accepted"`
	SoldOut   int    `json:"sold_out"`
	Errors    int    `json:"errors"`
	Failovers int    `json:"failovers"`           // purchases retried on the next replica (same Idempotency-Key)
	SKUs      int    `json:"skus"`                // products audited; the stock figures are their sums
	WorstSKU  string `json:"worst_sku,omitempty"` // the SKU with the most oversold plus lost updates, if any
	// Cancellations (-cancel-ratio): orders cancelled during the load, failed cancellations, and
	// the units the audit found returned to stock.
	Cancelled      int            `json:"cancelled"`
	CancelErrors   int            `json:"cancel_errors"`
	UnitsRestocked int64          `json:"units_restocked"`
	ErrorCodes     map[string]int `json:"error_codes,omitempty"`
	InitialStock   int64          `json:"initial_stock"`
	FinalStock     int64          `json:"final_stock"`
	Orders         int64          `json:"orders"`
	UnitsSold      int64          `json:"units_sold"`
	Oversold       int64          `json:"oversold"`
	LostUpdates    int64          `json:"lost_updates"`
	Undersold      int64          `json:"undersold"`
	Started        time.Time      `json:"started"` // when the mode's first purchase was sent: the origin of every at_ms
	Seconds        float64        `json:"seconds"`
	Throughput     float64        `json:"throughput_rps"`
	P50            float64        `json:"p50_ms"`
	P95            float64        `json:"p95_ms"`
	P99            float64        `json:"p99_ms"`
	Max            float64        `json:"max_ms"`
	Latency        []LatencyPoint `json:"latency"`
	Sales          []Sale         `json:"sales"`
	ErrorAnswers   []ErrorAnswer  `json:"error_answers,omitempty"` // every answer counted in Errors, in the order the purchases were sent
	Open           *OpenLoop      `json:"open_loop,omitempty"`     // the open loop's rates and answer classes (-rate)
	// FalseRefusals are the sku_busy refusals the replicas found false during the mode's run
	// (zkstock_false_refusals_total: the queue served the buyer's turn within the budget); nil
	// when a replica's metrics could not be read.
	FalseRefusals *int64 `json:"false_refusals,omitempty"`
}

// ErrorAnswer is one purchase answered with an error: when (since the mode started) and its code.
type ErrorAnswer struct {
	AtMillis float64 `json:"at_ms"`
	Code     string  `json:"code"`
}

// LatencyPoint is one point of the latency distribution.
type LatencyPoint struct {
	Percentile float64 `json:"percentile"`
	Millis     float64 `json:"ms"`
}

// Sale is one accepted purchase: when it was answered and the stock its replica reported left.
type Sale struct {
	AtMillis  float64 `json:"at_ms"`
	Remaining int64   `json:"remaining"`
}

func newReport(cfg Config) *Report {
	host, _ := os.Hostname()
	return &Report{
		Command: commandLine(os.Args),
		Machine: Machine{Host: host, OS: runtime.GOOS + "/" + runtime.GOARCH, CPUs: runtime.NumCPU(), CPU: cpuModel(), Go: runtime.Version()},
		Date:    time.Now().UTC().Format(time.RFC3339),
		Config:  cfg,
	}
}

// commandLine is the command as typed, quoted for a shell, with the admin token's value replaced:
// reports are shared, the token must not travel with them.
func commandLine(args []string) string {
	out := make([]string, len(args))
	redactNext := false
	for i, a := range args {
		switch {
		case redactNext:
			a, redactNext = redacted, false
		case a == "-admin-token" || a == "--admin-token":
			redactNext = true
		case strings.HasPrefix(a, "-admin-token=") || strings.HasPrefix(a, "--admin-token="):
			a = a[:strings.Index(a, "=")+1] + redacted
		}
		if a == "" || strings.ContainsAny(a, " \t'\"$&;|<>*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

const redacted = "REDACTED"

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// Check fails when a locked mode oversold, undersold or lost an update: the lock did not hold.
func (r *Report) Check() error {
	var errs []error
	for _, row := range r.Rows {
		if !LockedModes[row.Mode] {
			continue
		}
		if row.Oversold != 0 || row.LostUpdates != 0 || row.Undersold != 0 {
			errs = append(errs, fmt.Errorf("mode %s is not exact: oversold %d, lost updates %d, undersold %d",
				row.Mode, row.Oversold, row.LostUpdates, row.Undersold))
		}
	}
	return errors.Join(errs...)
}

var tableHeader = []string{"mode", "requests", "accepted", "sold out", "errors", "initial", "final", "oversold",
	"lost updates", "undersold", "req/s", "p50 ms", "p95 ms", "p99 ms"}

func (row Row) cells() []string {
	return []string{row.Mode, itoa(row.Requests), itoa(row.Accepted), itoa(row.SoldOut), itoa(row.Errors),
		i64(row.InitialStock), i64(row.FinalStock), i64(row.Oversold), i64(row.LostUpdates), i64(row.Undersold),
		fmt.Sprintf("%.0f", row.Throughput), fmt.Sprintf("%.1f", row.P50), fmt.Sprintf("%.1f", row.P95), fmt.Sprintf("%.1f", row.P99)}
}

func itoa(n int) string { return fmt.Sprint(n) }

// codeList is error codes and their counts, the most frequent first ("sku_busy 12, lock_unavailable 3").
func codeList(codes map[string]int) string {
	names := slices.Collect(maps.Keys(codes))
	slices.SortFunc(names, func(a, b string) int {
		if d := codes[b] - codes[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, codes[n])
	}
	return strings.Join(parts, ", ")
}
func i64(n int64) string { return fmt.Sprint(n) }

// WriteTable prints the rows as an aligned text table.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(tableHeader, "\t")+"\t")
	for _, row := range r.Rows {
		fmt.Fprintln(tw, strings.Join(row.cells(), "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range r.openTables() {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, line := range append([][]string{t.Header}, t.Rows...) {
			fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for _, row := range r.Rows {
		if row.SKUs > 1 {
			worst := "none is off"
			if row.WorstSKU != "" {
				worst = "the worst off is " + row.WorstSKU
			}
			if _, err := fmt.Fprintf(w, "%s: %d SKUs, figures summed over them; %s\n", row.Mode, row.SKUs, worst); err != nil {
				return err
			}
		}
		if row.Errors > 0 {
			if _, err := fmt.Fprintf(w, "%s: error answers by code: %s\n", row.Mode, codeList(row.ErrorCodes)); err != nil {
				return err
			}
		}
		if code := row.ErrorCodes["sku_busy"]; code > 0 || (row.FalseRefusals != nil && *row.FalseRefusals > 0) {
			found := Count(row.FalseRefusals)
			if _, err := fmt.Fprintf(w, "%s: %d purchases refused sku_busy; found false by the replicas (the queue would have served them within the budget): %s\n",
				row.Mode, code, found); err != nil {
				return err
			}
		}
		if row.Cancelled+row.CancelErrors > 0 {
			if _, err := fmt.Fprintf(w, "%s: %d orders cancelled during the load (%d cancellations failed), %d units back in stock; orders and units count the orders that stand\n",
				row.Mode, row.Cancelled, row.CancelErrors, row.UnitsRestocked); err != nil {
				return err
			}
		}
	}
	return nil
}

// WriteMarkdown prints the rows as a Markdown table, for the docs.
func (r *Report) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	main := table{Header: tableHeader}
	for _, row := range r.Rows {
		main.Rows = append(main.Rows, row.cells())
	}
	main.markdown(&b)
	for _, t := range r.openTables() {
		b.WriteString("\n")
		t.markdown(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// table is a header and rows of cells; the first column is text, the others mostly numbers.
type table struct {
	Header []string
	Rows   [][]string
}

func (t table) markdown(b *strings.Builder) {
	b.WriteString("| " + strings.Join(t.Header, " | ") + " |\n|")
	for i := range t.Header {
		if i == 0 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, row := range t.Rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
}

// WriteJSON writes the whole report.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
