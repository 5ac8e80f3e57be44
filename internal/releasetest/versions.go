package releasetest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Versions is the content of versions.yaml: the release version, the module
// directories released in lockstep, and the directories of go.work that are
// never tagged.
type Versions struct {
	Version  string   // the release version, such as "v0.3.0"
	Modules  []string // released module directories, relative to the repository root ("." is the root module)
	Excluded []string // go.work module directories that are never tagged
}

// ReadVersions parses root/versions.yaml. It reads the narrow form the file
// uses (a "version:" line and two lists of "- dir" items) so that
// scripts/release.sh can read the same file with sed; any other line is an
// error.
func ReadVersions(root string) (*Versions, error) {
	f, err := os.Open(filepath.Join(root, "versions.yaml"))
	if err != nil {
		return nil, fmt.Errorf("releasetest: %w", err)
	}
	defer f.Close()
	v := &Versions{}
	var list *[]string
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimRight(line, " \t")
		switch {
		case strings.TrimSpace(line) == "":
		case strings.HasPrefix(line, "version:"):
			v.Version = strings.TrimSpace(strings.TrimPrefix(line, "version:"))
			list = nil
		case line == "modules:":
			list = &v.Modules
		case line == "excluded:":
			list = &v.Excluded
		case list != nil && strings.HasPrefix(strings.TrimSpace(line), "- "):
			*list = append(*list, strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")))
		default:
			return nil, fmt.Errorf("releasetest: versions.yaml:%d: unexpected line %q", n, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("releasetest: versions.yaml: %w", err)
	}
	if !semver.IsValid(v.Version) || semver.Canonical(v.Version) != v.Version {
		return nil, fmt.Errorf("releasetest: versions.yaml: version %q is not a canonical semantic version", v.Version)
	}
	if len(v.Modules) == 0 {
		return nil, errors.New("releasetest: versions.yaml: no modules")
	}
	return v, nil
}

// Module is one module of the repository.
type Module struct {
	Dir  string // directory relative to the repository root, slash-separated ("." for the root)
	Path string // module path
	File *modfile.File
}

// ReadModule parses root/dir/go.mod.
func ReadModule(root, dir string) (*Module, error) {
	name := filepath.Join(root, filepath.FromSlash(dir), "go.mod")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("releasetest: %w", err)
	}
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, fmt.Errorf("releasetest: %w", err)
	}
	if f.Module == nil {
		return nil, fmt.Errorf("releasetest: %s has no module line", name)
	}
	return &Module{Dir: dir, Path: f.Module.Mod.Path, File: f}, nil
}

// WorkUses returns the directories of root/go.work's use block, cleaned and
// relative to root ("." for the root).
func WorkUses(root string) ([]string, *modfile.WorkFile, error) {
	name := filepath.Join(root, "go.work")
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, nil, fmt.Errorf("releasetest: %w", err)
	}
	wf, err := modfile.ParseWork(name, data, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("releasetest: %w", err)
	}
	var dirs []string
	for _, u := range wf.Use {
		dirs = append(dirs, filepath.ToSlash(filepath.Clean(u.Path)))
	}
	return dirs, wf, nil
}
