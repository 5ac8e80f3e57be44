package releasetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// BuildProxy writes, under dir, a file-system module proxy (GOPROXY=file://dir)
// that serves each of mods at version: @v/list, @v/VERSION.info, .mod and
// .zip. The zip holds the module's files in the working tree under root: the
// files git tracks or would track (untracked files that .gitignore does not
// ignore are included, so uncommitted work is what gets tested), less the
// files of nested modules. Outside a git work tree every file under the
// module's directory is taken. The .mod file is the module's go.mod as it
// is, so the requires a release would carry are the ones tested.
func BuildProxy(dir, root string, mods []*Module, version string, when time.Time) error {
	files, gitErr := gitFiles(root)
	var dirs []string
	for _, m := range mods {
		dirs = append(dirs, m.Dir)
	}
	for _, m := range mods {
		mv := module.Version{Path: m.Path, Version: version}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return fmt.Errorf("releasetest: %w", err)
		}
		vdir := filepath.Join(dir, filepath.FromSlash(esc), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return fmt.Errorf("releasetest: %w", err)
		}
		gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.Dir), "go.mod"))
		if err != nil {
			return fmt.Errorf("releasetest: %w", err)
		}
		info, err := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, when.UTC()})
		if err != nil {
			return fmt.Errorf("releasetest: %w", err)
		}
		var zbuf bytes.Buffer
		if gitErr == nil {
			err = modzip.Create(&zbuf, mv, moduleFiles(root, m.Dir, dirs, files))
		} else {
			err = modzip.CreateFromDir(&zbuf, mv, filepath.Join(root, filepath.FromSlash(m.Dir)))
		}
		if err != nil {
			return fmt.Errorf("releasetest: %s: %w", m.Path, err)
		}
		for name, data := range map[string][]byte{
			"list":            []byte(version + "\n"),
			version + ".info": info,
			version + ".mod":  gomod,
			version + ".zip":  zbuf.Bytes(),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return fmt.Errorf("releasetest: %w", err)
			}
		}
	}
	return nil
}

// gitFiles lists the files of root's work tree that git tracks or would
// track, slash-separated and relative to root.
func gitFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("releasetest: git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	sort.Strings(files)
	return files, nil
}

// moduleFiles returns the zip entries of the module in dir: the files under
// it that are not under another (nested) module directory and still exist
// (git lists a tracked file deleted in the work tree).
func moduleFiles(root, dir string, moduleDirs, files []string) []modzip.File {
	within := func(f, d string) bool { return d == "." || f == d || strings.HasPrefix(f, d+"/") }
	var out []modzip.File
	for _, f := range files {
		if !within(f, dir) {
			continue
		}
		nested := false
		for _, other := range moduleDirs {
			if other != dir && within(other, dir) && within(f, other) {
				nested = true
				break
			}
		}
		if nested {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(f))
		fi, err := os.Lstat(full)
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		rel := f
		if dir != "." {
			rel = strings.TrimPrefix(f, dir+"/")
		}
		out = append(out, zipFile{rel: path.Clean(rel), full: full, info: fi})
	}
	return out
}

type zipFile struct {
	rel, full string
	info      fs.FileInfo
}

func (f zipFile) Path() string                 { return f.rel }
func (f zipFile) Lstat() (fs.FileInfo, error)  { return f.info, nil }
func (f zipFile) Open() (io.ReadCloser, error) { return os.Open(f.full) }
