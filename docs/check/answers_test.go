package check_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// orderSource is the order package's code as docs/api.md's answers are checked against it,
// type-checked: what each function emits itself (the codes of its newError and badRequest calls)
// and the functions (and package variables) of order it refers to, called or passed on.
type orderSource struct {
	emits  map[types.Object][]string
	refs   map[types.Object][]types.Object
	byName map[string]types.Object // the Server's methods and order's functions, for the routes
	routes []route
	// general are the codes of NoRoute, NoMethod, and the middlewares that every route, or every
	// route of a group, runs.
	general []string
}

type route struct {
	method, path string
	handlers     []string
}

// readOrderSource type-checks ../../order (tests aside) against the export data go list -export
// writes for its imports: a static view of the code, not a run of it.
func readOrderSource(t *testing.T) orderSource {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./order")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export ./order: %v", err)
	}
	exports := map[string]string{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) })
	paths, err := filepath.Glob(filepath.Join(root, "order", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		// the files of the build users run: not those of a tag's (the planted lies')
		if ok, err := build.Default.MatchFile(filepath.Dir(path), filepath.Base(path)); err != nil {
			t.Fatal(err)
		} else if !ok {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}}
	pkg, err := (&types.Config{Importer: imp}).Check("github.com/zkstock/zkstock/order", fset, files, info)
	if err != nil {
		t.Fatalf("type-check order: %v", err)
	}
	src := orderSource{emits: map[types.Object][]string{}, refs: map[types.Object][]types.Object{}, byName: map[string]types.Object{}}
	// An interface method of order stands for every method of that name in order.
	methods := map[string][]types.Object{}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv != nil {
				methods[fd.Name.Name] = append(methods[fd.Name.Name], info.Defs[fd.Name])
			}
		}
	}
	own := func(o types.Object) bool { return o != nil && o.Pkg() == pkg }
	scan := func(owner types.Object, body ast.Node) {
		ast.Inspect(body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				switch callee(n.Fun) {
				case "newError":
					lit, ok := n.Args[1].(*ast.BasicLit)
					if !ok {
						t.Errorf("%s: newError with a code that is not a literal: the check cannot derive it", fset.Position(n.Pos()))
						return true
					}
					code, _ := strconv.Unquote(lit.Value)
					src.emits[owner] = append(src.emits[owner], code)
				case "badRequest":
					src.emits[owner] = append(src.emits[owner], "invalid_request")
				}
			case *ast.Ident:
				o := info.Uses[n]
				if !own(o) || o == owner {
					return true
				}
				switch o := o.(type) {
				case *types.Func:
					if sig := o.Type().(*types.Signature); sig.Recv() != nil && types.IsInterface(sig.Recv().Type()) {
						src.refs[owner] = append(src.refs[owner], methods[o.Name()]...)
						return true
					}
					src.refs[owner] = append(src.refs[owner], o.Origin())
				case *types.Var:
					if o.Parent() == pkg.Scope() { // a package variable: a table of funcs, say
						src.refs[owner] = append(src.refs[owner], o)
					}
				}
			}
			return true
		})
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				o := info.Defs[d.Name]
				if d.Recv == nil || strings.Contains(types.ExprString(d.Recv.List[0].Type), "Server") {
					src.byName[d.Name.Name] = o
				}
				if d.Body != nil {
					scan(o, d.Body)
				}
				if d.Name.Name == "Handler" {
					src.routes, src.general = readRoutes(t, d)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if vs, ok := spec.(*ast.ValueSpec); ok {
						for _, name := range vs.Names {
							scan(info.Defs[name], vs)
						}
					}
				}
			}
		}
	}
	if len(src.routes) < 10 {
		t.Fatalf("found %d routes in order's Handler; the way routes are registered changed?", len(src.routes))
	}
	var general []string
	for _, g := range src.general {
		general = append(general, src.reach(g)...)
	}
	src.general = general
	return src
}

// callee is the name a call's function goes by: f(...) or x.f(...).
func callee(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

var httpMethods = []string{"GET", "POST", "PUT", "DELETE", "PATCH"}

// readRoutes reads the route registrations of Handler: r.METHOD(path, handlers...) and groups
// (g := r.Group(prefix, middlewares...)). The codes that NoRoute, NoMethod and the middlewares
// of r.Use and the groups emit are general: returned as names of the functions to reach.
func readRoutes(t *testing.T, fd *ast.FuncDecl) ([]route, []string) {
	prefix := map[string]string{}
	var routes []route
	var general []string
	handlerNames := func(args []ast.Expr) []string {
		var out []string
		for _, a := range args {
			if s, ok := a.(*ast.SelectorExpr); ok {
				out = append(out, s.Sel.Name)
			}
		}
		return out
	}
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Rhs) == 1 {
			if call, ok := as.Rhs[0].(*ast.CallExpr); ok && callee(call.Fun) == "Group" {
				lit := call.Args[0].(*ast.BasicLit)
				p, _ := strconv.Unquote(lit.Value)
				prefix[as.Lhs[0].(*ast.Ident).Name] = p
				general = append(general, handlerNames(call.Args[1:])...)
			}
		}
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		switch {
		case sel.Sel.Name == "Use":
			general = append(general, handlerNames(call.Args)...)
		case sel.Sel.Name == "NoRoute" || sel.Sel.Name == "NoMethod":
			ast.Inspect(call, func(m ast.Node) bool {
				if c, ok := m.(*ast.CallExpr); ok && callee(c.Fun) == "newError" {
					general = append(general, "lit:"+c.Args[1].(*ast.BasicLit).Value)
				}
				return true
			})
		case slices.Contains(httpMethods, sel.Sel.Name):
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				t.Errorf("a route whose path is not a literal: the check cannot read it")
				return true
			}
			p, _ := strconv.Unquote(lit.Value)
			if x, ok := sel.X.(*ast.Ident); ok {
				p = prefix[x.Name] + p
			}
			routes = append(routes, route{sel.Sel.Name, p, handlerNames(call.Args[1:])})
		}
		return true
	})
	return routes, general
}

// reach is every code the function of that name emits, itself or through the functions of
// order it refers to, transitively. A call through an interface counts every method of that name,
// so the set can hold a code a route never answers, never miss one it does.
func (src orderSource) reach(name string) []string {
	if lit, ok := strings.CutPrefix(name, "lit:"); ok {
		code, _ := strconv.Unquote(lit)
		return []string{code}
	}
	seen := map[types.Object]bool{}
	var codes []string
	var walk func(types.Object)
	walk = func(o types.Object) {
		if o == nil || seen[o] {
			return
		}
		seen[o] = true
		for _, c := range src.emits[o] {
			if !slices.Contains(codes, c) {
				codes = append(codes, c)
			}
		}
		for _, r := range src.refs[o] {
			walk(r)
		}
	}
	walk(src.byName[name])
	slices.Sort(codes)
	return codes
}

var codeRE = regexp.MustCompile("[a-z]+(?:_[a-z]+)+|[a-z]{4,}")

// routeCell reads the first cell of a row of docs/api.md's table of endpoints: `METHOD PATH` items, and a
// bare `METHOD` that shares the path of the item after it (`GET`, `PUT /admin/lock-mode`).
func routeCell(cell string) []route {
	var out []route
	var pending []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(cell, -1) {
		f := strings.Fields(m[1])
		switch {
		case len(f) == 1 && slices.Contains(httpMethods, f[0]):
			pending = append(pending, f[0])
		case len(f) == 2 && slices.Contains(httpMethods, f[0]):
			path, _, _ := strings.Cut(f[1], "?") // GET /v1/orders?request_id=KEY
			for _, p := range append(pending, f[0]) {
				out = append(out, route{method: p, path: path})
			}
			pending = nil
		}
	}
	return out
}

// TestEveryAnswerOfAnEndpointIsInTheAPIPage: for every route the service registers, docs/api.md's
// table of endpoints has a row, and that row (with the sections it links to) names every error code the
// route's handlers can answer, as read from order's code; the codes every route can answer (no
// route, wrong method, admin token, panic) are named in the text under the table.
func TestEveryAnswerOfAnEndpointIsInTheAPIPage(t *testing.T) {
	src := readOrderSource(t)
	page := filepath.Join(root, "docs", "api.md")
	text := section(t, page, "endpoints")
	rows := map[string]string{} // "METHOD PATH" -> the rows' text, with what they link to
	var notes strings.Builder
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "| ") {
			notes.WriteString(l + "\n")
			continue
		}
		cs := cells(l)
		if len(cs) < 2 {
			continue
		}
		answers := cs[1]
		for _, m := range linkRE.FindAllStringSubmatch(cs[1], -1) {
			if file, anchor, ok := localLink(page, m[1]); ok && anchor != "" && strings.HasSuffix(file, ".md") {
				answers += "\n" + section(t, file, anchor)
			}
		}
		rs := routeCell(cs[0])
		if len(rs) == 0 { // "any other path": an answer of every route
			notes.WriteString(l + "\n")
		}
		for _, r := range rs {
			rows[r.method+" "+r.path] += "\n" + answers
		}
	}
	for _, r := range src.routes {
		key := r.method + " " + r.path
		row, ok := rows[key]
		if !ok {
			t.Errorf("docs/api.md's table of endpoints has no row for %s", key)
			continue
		}
		named := codeRE.FindAllString(row, -1)
		for _, h := range r.handlers {
			for _, code := range src.reach(h) {
				if !slices.Contains(named, code) {
					t.Errorf("%s can answer %q (from %s), which its row in docs/api.md does not name", key, code, h)
				}
			}
		}
	}
	general := codeRE.FindAllString(notes.String(), -1)
	for _, code := range src.general {
		if !slices.Contains(general, code) {
			t.Errorf("every route (or every admin route) can answer %q, which the text under docs/api.md's table of endpoints does not name", code)
		}
	}
}
