package answers_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/zkstock/zkstock/internal/answers"
)

// Every error answer the HTTP shell (package order) gives is one of answers.Table, at the status
// the table gives it, and every answer the table lists is one the shell gives: the checker
// (lincheck) holds each answer to the table's promise, so the two must not drift. The answers are
// read from the shell's source, every newError(status, "code", ...) call: the answers of the sale
// engine's errors (order/answers.go, saleAnswer) and the shell's own (bad input, routes, admin).
func TestEveryAnswerIsInTheTable(t *testing.T) {
	statuses := map[string]int{
		"StatusBadRequest": http.StatusBadRequest, "StatusUnauthorized": http.StatusUnauthorized,
		"StatusForbidden": http.StatusForbidden, "StatusNotFound": http.StatusNotFound,
		"StatusMethodNotAllowed": http.StatusMethodNotAllowed, "StatusConflict": http.StatusConflict,
		"StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge, "StatusUnsupportedMediaType": http.StatusUnsupportedMediaType,
		"StatusUnprocessableEntity": http.StatusUnprocessableEntity, "StatusInternalServerError": http.StatusInternalServerError,
		"StatusServiceUnavailable": http.StatusServiceUnavailable, "StatusTooManyRequests": http.StatusTooManyRequests,
		"StatusRequestHeaderFieldsTooLarge": http.StatusRequestHeaderFieldsTooLarge, "StatusNotImplemented": http.StatusNotImplemented,
		"StatusHTTPVersionNotSupported": http.StatusHTTPVersionNotSupported,
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "order", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	given := map[answers.Answer]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		// fn is the function a call is in: an answer whose outcome is not known (but a panic's)
		// is given only by the table of the sale engine's errors (sale.KindOutcomeUnknown) and
		// by the answer of a switch of the fleet's mode.
		fn := ""
		ast.Inspect(f, func(n ast.Node) bool {
			if fd, ok := n.(*ast.FuncDecl); ok {
				fn = fd.Name.Name
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "newError" {
				return true
			}
			var status int
			switch s := call.Args[0].(type) {
			case *ast.SelectorExpr:
				status = statuses[s.Sel.Name]
			case *ast.BasicLit:
				status, _ = strconv.Atoi(s.Value)
			}
			lit, ok := call.Args[1].(*ast.BasicLit)
			if status == 0 || !ok {
				t.Errorf("%s: newError with a status or code this test cannot read: %s", fset.Position(call.Pos()), src[call.Pos()-1:call.End()-1])
				return true
			}
			code, _ := strconv.Unquote(lit.Value)
			given[answers.Answer{Status: status, Code: code}] = true
			a, ok := answers.Lookup(status, code)
			if !ok {
				t.Errorf("%s: %d %s is not in answers.Table: say what it promises there", fset.Position(call.Pos()), status, code)
			}
			if ok && a.Promise == answers.Unknown && status != http.StatusInternalServerError && fn != "saleAnswer" && fn != "switchError" {
				t.Errorf("%s: %d %s, an answer of unknown outcome, is given outside saleAnswer (the sale engine's errors) and switchError", fset.Position(call.Pos()), status, code)
			}
			return true
		})
	}
	if len(given) < 20 {
		t.Fatalf("found only %d answers in the source: %v", len(given), given)
	}
	for _, a := range answers.Table {
		if !given[answers.Answer{Status: a.Status, Code: a.Code}] {
			t.Errorf("answers.Table lists %d %s, which the service never gives", a.Status, a.Code)
		}
	}
}
