package loadtest

import "fmt"

var (
	openRatesHeader = []string{"mode", "offered/s", "sent/s", "send lag p99 ms", "goodput/s", "sold out at s", "answered after", "came after"}
	openClassHeader = []string{"mode", "offered/s", "buyers", "answer", "count", "p50 ms", "p90 ms", "p99 ms", "max ms"}
)

// openTables are the open loop's two tables, when it ran: the rates per mode (and sweep step),
// then the answers by class: all of them, those answered after the sell-out, and those to the
// buyers who came after it.
func (r *Report) openTables() []table {
	rates, classes := table{Header: openRatesHeader}, table{Header: openClassHeader}
	for _, row := range r.Rows {
		o := row.Open
		if o == nil {
			continue
		}
		offered := fmt.Sprintf("%.0f", o.OfferedRPS)
		soldOut, answered, came := "-", "-", "-"
		if o.SoldOut {
			soldOut, answered, came = fmt.Sprintf("%.2f", o.SoldOutAtMS/1000), itoa(count(o.AnsweredAfter)), itoa(count(o.LaterBuyers))
		}
		rates.Rows = append(rates.Rows, []string{row.Mode, offered, fmt.Sprintf("%.0f", o.SendRPS), fmt.Sprintf("%.1f", o.SendLagP99),
			fmt.Sprintf("%.0f", o.GoodputRPS), soldOut, answered, came})
		for _, group := range []struct {
			name string
			cs   []ClassStats
		}{{"all", o.Classes}, {"answered after sell-out", o.AnsweredAfter}, {"came after sell-out", o.LaterBuyers}} {
			for _, c := range group.cs {
				classes.Rows = append(classes.Rows, []string{row.Mode, offered, group.name, c.Class, itoa(c.Count),
					fmt.Sprintf("%.1f", c.P50), fmt.Sprintf("%.1f", c.P90), fmt.Sprintf("%.1f", c.P99), fmt.Sprintf("%.1f", c.Max)})
			}
		}
	}
	if len(rates.Rows) == 0 {
		return nil
	}
	return []table{rates, classes}
}

// count is how many answers the classes hold.
func count(cs []ClassStats) int {
	n := 0
	for _, c := range cs {
		n += c.Count
	}
	return n
}
