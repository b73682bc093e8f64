package locker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every Go block of README.md is a whole program that builds as written: a newcomer pastes the
// Quick start into main.go and it compiles. Each block is written to a directory of its own
// inside the module (named with a leading underscore, which ./... never matches), and built and
// vetted there with the module's dependencies.
func TestREADMEGoBlocksBuild(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: the README's blocks are not built")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go block: the Quick start is one")
	}
	dir, err := os.MkdirTemp(".", "_readme")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var pkgs []string
	for i, b := range blocks {
		if !strings.HasPrefix(b, "package main\n") {
			t.Errorf("README.md's Go block %d does not start with \"package main\": a reader cannot build it as written:\n%s", i+1, b)
			continue
		}
		pkg := filepath.Join(dir, string(rune('a'+i)))
		if err := os.Mkdir(pkg, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pkg, "main.go"), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
	}
	if len(pkgs) == 0 {
		return
	}
	// go vet type-checks every package, as a build would, and reports more.
	cmd := exec.Command(goTool, append([]string{"vet"}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go blocks do not build: %v\n%s", err, out)
	}
}

// goBlocks returns the contents of the ```go fenced blocks of a Markdown text.
func goBlocks(md string) []string {
	var blocks []string
	var b strings.Builder
	in := false
	for line := range strings.Lines(md) {
		switch fence := strings.TrimSpace(line); {
		case !in && fence == "```go":
			in = true
			b.Reset()
		case in && fence == "```":
			in = false
			blocks = append(blocks, b.String())
		case in:
			b.WriteString(line)
		}
	}
	return blocks
}

// A newcomer reads the README in five minutes: it stays within 12 KB; details go to docs/.
func TestREADMEShort(t *testing.T) {
	fi, err := os.Stat("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 12000 {
		t.Fatalf("README.md is %d bytes, want at most 12,000: move details to docs/", fi.Size())
	}
}
