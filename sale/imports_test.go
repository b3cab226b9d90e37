package sale

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The engine knows nothing of HTTP and nothing of its shell: none of its files imports gin,
// net/http or package order (imports flow cmd -> order -> sale).
func TestTheEngineImportsNoHTTP(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "net/http" || strings.HasPrefix(path, "github.com/gin-gonic/") || path == "github.com/zkstock/zkstock/order" ||
				strings.HasPrefix(path, "github.com/zkstock/zkstock/order/") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found %d files: run in the package's directory", len(files))
	}
}
