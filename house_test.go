package locker_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docs/layout.md is the map of the house: it names every Go file of the root package and of
// backend/rediscore, so that a file added without a line there fails here.
func TestLayoutNamesEveryFile(t *testing.T) {
	layout, err := os.ReadFile("docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{".", "backend/rediscore"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			name := filepath.Base(f)
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			named := regexp.MustCompile(`(^|[\s/;,(])` + regexp.QuoteMeta(name) + `\b`)
			if !named.Match(layout) {
				t.Errorf("docs/layout.md does not name %s", filepath.Join(dir, name))
			}
		}
	}
}

// maxDocLines is the longest doc comment of an exported name: its contract and its default; the
// depth goes to docs/guarantees.md.
const maxDocLines = 12

// Every exported name's doc comment, in every package of the module (the nested modules too),
// states its contract in at most maxDocLines lines.
func TestDocCommentsShort(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata"):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		check := func(name string, doc *ast.CommentGroup) {
			if doc == nil || !ast.IsExported(name) {
				return
			}
			if n := strings.Count(doc.Text(), "\n"); n > maxDocLines {
				t.Errorf("%s: the doc comment of %s has %d lines, more than %d", fset.Position(doc.Pos()), name, n, maxDocLines)
			}
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				check(decl.Name.Name, decl.Doc)
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					doc := decl.Doc
					if len(decl.Specs) > 1 {
						doc = nil
					}
					switch spec := spec.(type) {
					case *ast.TypeSpec:
						if spec.Doc != nil {
							doc = spec.Doc
						}
						check(spec.Name.Name, doc)
						checkMembers(spec, check)
					case *ast.ValueSpec:
						if spec.Doc != nil {
							doc = spec.Doc
						}
						for _, n := range spec.Names {
							check(n.Name, doc)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkMembers checks the doc comments of a struct's fields or an interface's methods.
func checkMembers(spec *ast.TypeSpec, check func(string, *ast.CommentGroup)) {
	var fields *ast.FieldList
	switch typ := spec.Type.(type) {
	case *ast.StructType:
		fields = typ.Fields
	case *ast.InterfaceType:
		fields = typ.Methods
	default:
		return
	}
	for _, field := range fields.List {
		for _, n := range field.Names {
			check(spec.Name.Name+"."+n.Name, field.Doc)
		}
	}
}
