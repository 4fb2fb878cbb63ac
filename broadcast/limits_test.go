package broadcast_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Code limits on the package's non-test code (issue 27): the core stays
// small enough to read in one sitting. The same figures from the command
// line:
//
//	go run github.com/fzipp/gocyclo/cmd/gocyclo@latest -over 12 $(ls broadcast/*.go | grep -v _test)
//	ls broadcast/*.go | grep -v _test | xargs wc -l
const (
	maxFuncLines     = 50   // lines of one function, from func to its closing brace
	maxComplexity    = 12   // cyclomatic complexity, counted as gocyclo counts it
	maxPackageLines  = 1800 // lines of all non-test files together
	maxFileLines     = 300  // lines of one non-test file
	maxAtomicFields  = 8    // struct fields of a sync/atomic type, whole package
	maxMutexesStruct = 1    // sync.Mutex or sync.RWMutex fields in one struct
)

func TestCodeLimits(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var total, atomics int
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(string(src), "\n")
		total += lines
		if lines > maxFileLines {
			t.Errorf("%s: %d lines, limit %d", name, lines, maxFileLines)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "runtime.Gosched") {
			t.Errorf("%s calls runtime.Gosched", name)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body == nil {
					return true
				}
				start, end := fset.Position(n.Pos()).Line, fset.Position(n.End()).Line
				if l := end - start + 1; l > maxFuncLines {
					t.Errorf("%s:%d: %s: %d lines, limit %d", name, start, n.Name.Name, l, maxFuncLines)
				}
				if c := complexity(n); c > maxComplexity {
					t.Errorf("%s:%d: %s: cyclomatic complexity %d, limit %d", name, start, n.Name.Name, c, maxComplexity)
				}
			case *ast.StructType:
				mutexes := 0
				for _, field := range n.Fields.List {
					pkg, typ := selector(field.Type)
					count := max(len(field.Names), 1)
					switch {
					case pkg == "atomic":
						atomics += count
					case pkg == "sync" && (typ == "Mutex" || typ == "RWMutex"):
						mutexes += count
					}
				}
				if mutexes > maxMutexesStruct {
					t.Errorf("%s:%d: a struct with %d mutexes, limit %d", name, fset.Position(n.Pos()).Line, mutexes, maxMutexesStruct)
				}
			}
			return true
		})
	}
	if total > maxPackageLines {
		t.Errorf("%d lines of non-test code, limit %d", total, maxPackageLines)
	}
	if atomics > maxAtomicFields {
		t.Errorf("%d atomic fields, limit %d", atomics, maxAtomicFields)
	}
	t.Logf("%d lines of non-test code, %d atomic fields", total, atomics)
}

// selector returns the package and name of a field type such as
// atomic.Uint64 or atomic.Pointer[T].
func selector(e ast.Expr) (pkg, name string) {
	switch e := e.(type) {
	case *ast.IndexExpr:
		return selector(e.X)
	case *ast.IndexListExpr:
		return selector(e.X)
	case *ast.SelectorExpr:
		if id, ok := e.X.(*ast.Ident); ok {
			return id.Name, e.Sel.Name
		}
	}
	return "", ""
}

// complexity is gocyclo's count: 1, plus one for each if, for, range,
// non-default case and comm clause, && and ||.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
