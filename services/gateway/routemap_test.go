package gateway

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/waggle-os/core/libs/protocol"
	"github.com/waggle-os/core/services/gateway/internal/openapi"
)

// This file reads the gateway's own source to check what the route table
// says about each handler (the bus subjects it calls) and to generate the
// "Where things are" map of docs/architecture.md: route → handler file →
// subject → the file of the service that answers it.

const (
	gatewayModule = "github.com/waggle-os/core/services/gateway"
	repoRoot      = "../.."
)

// handlerFunc names the Go function behind a route's handler.
type handlerFunc struct {
	pkg  string // import path
	recv string // receiver type without '*', "" for a function
	name string
}

func funcOf(h http.Handler) (handlerFunc, bool) {
	v := reflect.ValueOf(h)
	if v.Kind() != reflect.Func {
		return handlerFunc{}, false
	}
	full := runtime.FuncForPC(v.Pointer()).Name()
	full = strings.TrimSuffix(full, "-fm")
	slash := strings.LastIndex(full, "/")
	dot := strings.Index(full[slash+1:], ".")
	if dot < 0 {
		return handlerFunc{}, false
	}
	hf := handlerFunc{pkg: full[:slash+1+dot]}
	rest := full[slash+1+dot+1:]
	if recv, name, ok := strings.Cut(rest, "."); ok {
		hf.recv = strings.Trim(recv, "(*)")
		hf.name = name
	} else {
		hf.name = rest
	}
	return hf, true
}

// goPackage is one parsed package directory.
type goPackage struct {
	dir   string
	fset  *token.FileSet
	funcs map[string][]*ast.FuncDecl // by name (methods of every type)
	// imports are the names the package's files import packages under.
	imports map[string]bool
}

var (
	pkgMu    sync.Mutex
	pkgCache = map[string]*goPackage{}
)

func parseDir(t *testing.T, dir string) *goPackage {
	t.Helper()
	pkgMu.Lock()
	defer pkgMu.Unlock()
	if p, ok := pkgCache[dir]; ok {
		return p
	}
	p := &goPackage{dir: dir, fset: token.NewFileSet(), funcs: map[string][]*ast.FuncDecl{}, imports: map[string]bool{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(p.fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			} else if strings.HasPrefix(name, "v") && strings.Count(path, "/") > 1 {
				// A major-version suffix (chi/v5): the package is the element before it.
				if _, err := strconv.Atoi(name[1:]); err == nil {
					parts := strings.Split(path, "/")
					name = parts[len(parts)-2]
				}
			}
			p.imports[name] = true
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				p.funcs[fd.Name.Name] = append(p.funcs[fd.Name.Name], fd)
			}
		}
	}
	pkgCache[dir] = p
	return p
}

func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	if st, ok := t.(*ast.StarExpr); ok {
		t = st.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// decl finds hf's declaration and the file it is in (relative to the repo).
func decl(t *testing.T, hf handlerFunc) (*goPackage, *ast.FuncDecl, string) {
	t.Helper()
	rel, ok := strings.CutPrefix(hf.pkg, gatewayModule)
	if !ok {
		return nil, nil, ""
	}
	p := parseDir(t, filepath.Join(".", filepath.FromSlash(strings.TrimPrefix(rel, "/"))))
	for _, fd := range p.funcs[hf.name] {
		if recvName(fd) == hf.recv {
			file := p.fset.Position(fd.Pos()).Filename
			return p, fd, filepath.ToSlash(filepath.Join("services/gateway", file))
		}
	}
	t.Fatalf("no declaration of %+v", hf)
	return nil, nil, ""
}

// protocolSubjects are the subjects of libs/protocol's table by name: every
// Endpoint and Event variable and Subj constant, plus the per-turn subject
// functions written with a {turnId}.
func protocolSubjects(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{
		"TurnControl": protocol.TurnControl("{turnId}").Subject,
		"TurnEvents":  protocol.TurnEvents("{turnId}"),
	}
	str := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(lit.Value)
		return v, err == nil
	}
	fset := token.NewFileSet()
	files, _ := filepath.Glob(filepath.Join(repoRoot, "libs/protocol/*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
				return true
			}
			name := vs.Names[0].Name
			switch v := vs.Values[0].(type) {
			case *ast.BasicLit:
				if s, ok := str(v); ok && strings.HasPrefix(name, "Subj") {
					out[name] = s
				}
			case *ast.CompositeLit:
				// Endpoint[Req, Rep]{Service, Name, Subject}; Event[T]{Subject}.
				var typ ast.Expr
				switch ix := v.Type.(type) {
				case *ast.IndexListExpr:
					typ = ix.X
				case *ast.IndexExpr:
					typ = ix.X
				}
				id, ok := typ.(*ast.Ident)
				switch {
				case ok && id.Name == "Endpoint" && len(v.Elts) == 3:
					if s, ok := str(v.Elts[2]); ok {
						out[name] = s
					}
				case ok && id.Name == "Event" && len(v.Elts) == 1:
					if s, ok := str(v.Elts[0]); ok {
						out[name] = s
					}
				}
			}
			return true
		})
	}
	if len(out) < 40 {
		t.Fatalf("read only %d subjects from libs/protocol", len(out))
	}
	return out
}

// rootIdent is the identifier a selector chain starts with (s in s.hub.x).
func rootIdent(e ast.Expr) (string, bool) {
	for {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name, true
		case *ast.SelectorExpr:
			e = x.X
		case *ast.CallExpr:
			e = x.Fun
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		default:
			return "", false
		}
	}
}

func recvIdent(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 || len(fd.Recv.List[0].Names) == 0 {
		return ""
	}
	return fd.Recv.List[0].Names[0].Name
}

// subjectsUsed follows fd and every function or method of its package it
// refers to, and returns the protocol subjects they name. Methods are
// matched by name (there are no types here): a selector is followed when
// it starts at the function's receiver, or names an unexported method on
// anything but an imported package, which only this package's types can
// have.
func subjectsUsed(p *goPackage, fd *ast.FuncDecl, subjects map[string]string) []string {
	seen := map[*ast.FuncDecl]bool{}
	found := map[string]bool{}
	var visit func(*ast.FuncDecl)
	visit = func(fd *ast.FuncDecl) {
		if seen[fd] || fd.Body == nil {
			return
		}
		seen[fd] = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "protocol" {
					if v, ok := subjects[x.Sel.Name]; ok {
						found[v] = true
					}
					return true
				}
				root, ok := rootIdent(x.X)
				if !ok || p.imports[root] {
					return true
				}
				if root != recvIdent(fd) && ast.IsExported(x.Sel.Name) {
					return true
				}
				for _, d := range p.funcs[x.Sel.Name] {
					if d.Recv != nil {
						visit(d)
					}
				}
			case *ast.Ident:
				for _, d := range p.funcs[x.Name] {
					if d.Recv == nil {
						visit(d)
					}
				}
			}
			return true
		})
	}
	visit(fd)
	out := make([]string, 0, len(found))
	for v := range found {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// routeInfo is what the map shows of one route.
type routeInfo struct {
	key      string // "METHOD /path"
	handler  string // file: function
	subjects []string
}

func routeInfos(t *testing.T) []routeInfo {
	t.Helper()
	subjects := protocolSubjects(t)
	var out []routeInfo
	for key, h := range routerRoutes(t) {
		ri := routeInfo{key: key}
		hf, ok := funcOf(h)
		if !ok {
			ri.handler = fmt.Sprintf("(%T)", h)
			out = append(out, ri)
			continue
		}
		p, fd, file := decl(t, hf)
		if fd == nil {
			// Not the gateway's code: a library's handler (the metrics).
			ri.handler = "`" + strings.TrimPrefix(hf.pkg, "github.com/") + "`"
		} else {
			ri.handler = file + " `" + hf.name + "`"
			ri.subjects = subjectsUsed(p, fd, subjects)
		}
		out = append(out, ri)
	}
	slices.SortFunc(out, func(a, b routeInfo) int { return strings.Compare(routeSortKey(a.key), routeSortKey(b.key)) })
	return out
}

func routeSortKey(key string) string {
	method, path, _ := strings.Cut(key, " ")
	return path + " " + method
}

// TestDescribedSubjectsMatchHandlers checks the route table's subjects
// (which feed the map) against what each handler's code names.
func TestDescribedSubjectsMatchHandlers(t *testing.T) {
	described := map[string][]string{}
	for path, item := range openapi.Build().Paths {
		for method, op := range item {
			s := slices.Clone(op.Subjects)
			slices.Sort(s)
			described[strings.ToUpper(method)+" "+path] = s
		}
	}
	for _, ri := range routeInfos(t) {
		want, ok := described[ri.key]
		if !ok {
			continue // TestRouterMatchesDescription reports it
		}
		if !slices.Equal(ri.subjects, want) {
			t.Errorf("%s: the handler (%s) names subjects %q, the route table says %q", ri.key, ri.handler, ri.subjects, want)
		}
	}
}

// answerer is the service code that answers one subject.
type answerer struct {
	registered string // file that registers the endpoint or subscription
	handler    string // file: function of the handler, when it is a named one
}

// answerers reads the services other than the gateway for the code that
// answers each subject of the table: the bus.Handle call that registers it
// (or the subscription that listens to it) and, when the handler is a
// method, the method's file.
func answerers(t *testing.T) map[string]answerer {
	t.Helper()
	out := map[string]answerer{}
	protocolName := func(e ast.Expr) string {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == "protocol" {
			return sel.Sel.Name
		}
		return ""
	}
	for _, svc := range []string{"sessionstore", "approval", "command", "turnrunner"} {
		root := filepath.Join(repoRoot, "services", svc)
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return err
			}
			p := parseDir(t, path)
			for _, fds := range p.funcs {
				for _, fd := range fds {
					if fd.Body == nil {
						continue
					}
					ast.Inspect(fd.Body, func(n ast.Node) bool {
						var subject string
						var handler ast.Expr
						switch x := n.(type) {
						case *ast.CallExpr:
							if sel, ok := x.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Handle" || sel.Sel.Name == "Subscribe") {
								switch len(x.Args) {
								case 3: // bus.Handle(svc, ep, fn), bus.Subscribe(nc, ev, fn)
									subject, handler = protocolName(x.Args[1]), x.Args[2]
								case 2: // nc.Subscribe(subject, fn)
									subject, handler = protocolName(x.Args[0]), x.Args[1]
								}
							}
						}
						if subject == "" {
							return true
						}
						file, _ := filepath.Rel(repoRoot, p.fset.Position(n.Pos()).Filename)
						a := answerer{registered: filepath.ToSlash(file)}
						if hd := methodDecl(p, fd, handler); hd != nil {
							hf, _ := filepath.Rel(repoRoot, p.fset.Position(hd.Pos()).Filename)
							a.handler = filepath.ToSlash(hf) + " `" + hd.Name.Name + "`"
						}
						if prev, dup := out[subject]; dup && prev != a {
							t.Errorf("%s is answered in two places: %+v and %+v", subject, prev, a)
						}
						out[subject] = a
						return true
					})
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// methodDecl resolves a handler written as recv.method inside fd, where
// recv is fd's receiver: the method of fd's receiver type.
func methodDecl(p *goPackage, fd *ast.FuncDecl, e ast.Expr) *ast.FuncDecl {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	id, ok := sel.X.(*ast.Ident)
	if !ok || id.Name != recvIdent(fd) {
		return nil
	}
	for _, d := range p.funcs[sel.Sel.Name] {
		if d.Recv != nil && recvName(d) == recvName(fd) {
			return d
		}
	}
	return nil
}

// Markers of the generated map in docs/architecture.md.
const (
	mapBegin = "<!-- BEGIN routes map: generated by TestArchitectureMap; WAGGLE_UPDATE_DOCS=1 go test ./services/gateway -run TestArchitectureMap rewrites it -->"
	mapEnd   = "<!-- END routes map -->"
)

// TestArchitectureMap checks that docs/architecture.md carries the map of
// every route as the code has it (WAGGLE_UPDATE_DOCS=1 rewrites it).
func TestArchitectureMap(t *testing.T) {
	subjects := protocolSubjects(t)
	names := map[string]string{}
	for name, v := range subjects {
		names[v] = name
	}
	ans := answerers(t)
	// The per-turn subjects are not endpoints: control messages go to the
	// runner's wildcard subscription, events come from the turn stream.
	ans["TurnControl"] = ans["SubjTurnControlAll"]
	ans["TurnEvents"] = answerer{registered: "JetStream stream `WAGGLE_TURNS`, published by services/turnrunner/turnevents/publisher.go"}
	if _, err := os.Stat(filepath.Join(repoRoot, "services/turnrunner/turnevents/publisher.go")); err != nil {
		t.Errorf("the map names services/turnrunner/turnevents/publisher.go: %v", err)
	}
	var b strings.Builder
	b.WriteString(mapBegin + "\n\n")
	b.WriteString("| route | handler | endpoint (bus subject) | answered by |\n| --- | --- | --- | --- |\n")
	for _, ri := range routeInfos(t) {
		var subj, by []string
		for _, v := range ri.subjects {
			name := "protocol." + names[v]
			if strings.Contains(v, "{turnId}") {
				name += "(turnId)"
			}
			subj = append(subj, "`"+name+"` (`"+v+"`)")
			a, ok := ans[names[v]]
			switch {
			case ok && a.handler != "" && !strings.HasPrefix(a.handler, a.registered+" "):
				by = append(by, a.handler+" (registered in "+a.registered+")")
			case ok && a.handler != "":
				by = append(by, a.handler)
			case ok:
				by = append(by, a.registered)
			default:
				by = append(by, "—")
			}
		}
		if len(subj) == 0 {
			subj, by = []string{"—"}, []string{"the gateway itself"}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", ri.key, ri.handler, strings.Join(subj, "<br>"), strings.Join(by, "<br>"))
	}
	b.WriteString("\n" + mapEnd)
	want := b.String()

	path := filepath.Join(repoRoot, "docs", "architecture.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	i, j := strings.Index(doc, mapBegin), strings.Index(doc, mapEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no routes map between %q and %q", path, mapBegin, mapEnd)
	}
	got := doc[i : j+len(mapEnd)]
	if got == want {
		return
	}
	if os.Getenv("WAGGLE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j+len(mapEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("the routes map in %s is out of date; run WAGGLE_UPDATE_DOCS=1 go test ./services/gateway -run TestArchitectureMap\nwant:\n%s", path, want)
}
