package demo

// Finding or building fabtests for `metaroce fabtests`: from a cache
// directory holding an earlier build, else from the libfabric source the
// user points at (FABTESTS_SRC), built out of tree against the system's
// libfabric. Nothing of fabtests lives in this repository.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// fabtestsVersion is the fabtests release the runner builds and expects:
// the one matching Debian bookworm's libfabric (libfabric1, libfabric-dev
// 1.17.0), which the programs link against.
const fabtestsVersion = "1.17.0"

// fabtestsDefaultCache is where a build is kept between runs.
const fabtestsDefaultCache = "/var/cache/metaroce/fabtests-" + fabtestsVersion

// fabtestsStamp, in the cache, says the build finished and what it was
// built from.
const fabtestsStamp = "BUILT"

// errFabtestsNoSource: no build in the cache and no source to make one.
// The runner and its test skip on it, saying so.
var errFabtestsNoSource = errors.New("fabtests")

// fabtestsBuild is a usable fabtests: its programs and runfabtests.sh in
// Bin, and the roots where test_configs/ may be found.
type fabtestsBuild struct {
	Bin    string
	Roots  []string
	Source string // what it was built from, as the stamp says
}

// fabtestsCached returns the build in cache, if a finished one is there.
func fabtestsCached(cache string) (*fabtestsBuild, bool) {
	stamp, err := os.ReadFile(filepath.Join(cache, fabtestsStamp))
	if err != nil {
		return nil, false
	}
	bin := filepath.Join(cache, "bin")
	for _, f := range []string{"runfabtests.sh", "fi_rdm_pingpong"} {
		if _, err := os.Stat(filepath.Join(bin, f)); err != nil {
			return nil, false
		}
	}
	return &fabtestsBuild{Bin: bin, Roots: []string{filepath.Join(cache, "src"), filepath.Join(cache, "share", "fabtests")},
		Source: strings.TrimSpace(string(stamp))}, true
}

// fabtestsFromBin is a -bin directory: an installed fabtests' bin (or a
// stand-in), with test_configs looked for beside it.
func fabtestsFromBin(bin string) (*fabtestsBuild, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(abs, "runfabtests.sh")); err != nil {
		return nil, fmt.Errorf("fabtests: -bin %s: no runfabtests.sh there (want an installed fabtests' bin directory)", bin)
	}
	up := filepath.Dir(abs)
	return &fabtestsBuild{Bin: abs, Roots: []string{filepath.Join(up, "src"), filepath.Join(up, "share", "fabtests")}, Source: abs}, nil
}

// fabtestsFindOrBuild returns the cached build, or builds one from src
// (when rebuild, or none is cached). With neither it returns
// errFabtestsNoSource wrapped in a message saying what to do.
func fabtestsFindOrBuild(src, cache string, rebuild bool, log io.Writer) (*fabtestsBuild, error) {
	if b, ok := fabtestsCached(cache); ok && !rebuild {
		return b, nil
	}
	if src == "" {
		return nil, fmt.Errorf("%w: no fabtests build in %s and no source to build one from: skipped "+
			"(set FABTESTS_SRC, or -src, to a libfabric checkout at v%s: a libfabric tree, a fabtests tree, or a git directory with @TAG)",
			errFabtestsNoSource, cache, fabtestsVersion)
	}
	if err := fabtestsTools(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("fabtests: cache: %w", err)
	}
	// One build at a time in a cache: a second runner waits for the
	// first's, then uses it.
	unlock, err := lockDir(cache)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if b, ok := fabtestsCached(cache); ok && !rebuild {
		return b, nil
	}
	return fabtestsMake(src, cache, log)
}

func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// fabtestsTools checks what ./autogen.sh, configure and make need, naming
// the Debian packages (scripts/deps.sh fabtests installs them).
func fabtestsTools() error {
	var missing []string
	for _, e := range [][2]string{{"autoreconf", "autoconf"}, {"automake", "automake"}, {"libtoolize", "libtool"},
		{"make", "make"}, {"cc", "gcc"}, {"tar", "tar"}} {
		if _, err := exec.LookPath(e[0]); err != nil {
			missing = append(missing, e[1])
		}
	}
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		missing = append(missing, "libfabric-dev")
	}
	if len(missing) > 0 {
		return fmt.Errorf("fabtests: building fabtests needs the Debian packages %s: scripts/deps.sh fabtests (make deps-fabtests) installs them",
			strings.Join(missing, " "))
	}
	return nil
}

// fabtestsSource is where the fabtests sources come from: a directory to
// copy, or a git directory and a tag to archive.
type fabtestsSource struct {
	dir    string // a fabtests tree
	gitDir string // or: git --git-dir=gitDir archive tag fabtests
	tag    string
}

func (s fabtestsSource) String() string {
	if s.gitDir != "" {
		return s.gitDir + "@" + s.tag
	}
	return s.dir
}

// resolveFabtestsSource reads FABTESTS_SRC: a libfabric tree (DIR/fabtests),
// a fabtests tree, or a git directory (bare, or a checkout's .git or the
// checkout itself) with @TAG (v1.17.0 when the tag is left out of a bare
// git directory).
func resolveFabtestsSource(src string) (fabtestsSource, error) {
	path, tag := src, ""
	if i := strings.LastIndex(src, "@"); i > 0 {
		if _, err := os.Stat(src); err != nil {
			path, tag = src[:i], src[i+1:]
		}
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return fabtestsSource{}, fmt.Errorf("fabtests: source %q: not a directory", path)
	}
	isGit := func(d string) bool {
		_, e1 := os.Stat(filepath.Join(d, "HEAD"))
		_, e2 := os.Stat(filepath.Join(d, "objects"))
		return e1 == nil && e2 == nil
	}
	gitDir := ""
	switch {
	case isGit(path):
		gitDir = path
	case isGit(filepath.Join(path, ".git")):
		gitDir = filepath.Join(path, ".git")
	}
	if tag != "" || (gitDir == path && gitDir != "") {
		if gitDir == "" {
			return fabtestsSource{}, fmt.Errorf("fabtests: source %q: @%s given but %s is no git directory", src, tag, path)
		}
		if tag == "" {
			tag = "v" + fabtestsVersion
		}
		return fabtestsSource{gitDir: gitDir, tag: tag}, nil
	}
	for _, d := range []string{filepath.Join(path, "fabtests"), path} {
		if _, err := os.Stat(filepath.Join(d, "common", "shared.c")); err == nil {
			return fabtestsSource{dir: d}, nil
		}
	}
	return fabtestsSource{}, fmt.Errorf("fabtests: source %q: neither a libfabric tree (fabtests/common/shared.c) nor a fabtests tree (common/shared.c) nor a git directory", src)
}

var acInitVersion = regexp.MustCompile(`AC_INIT\(\[fabtests\],\s*\[([^\]]+)\]`)

// fabtestsMake builds fabtests from src into cache: the sources copied to
// cache/src (autogen.sh writes into its tree), configured and compiled in
// cache/build, installed with prefix cache (cache/bin, cache/share). A
// version other than fabtestsVersion is refused: the programs must match
// the libfabric they run against.
func fabtestsMake(src, cache string, log io.Writer) (*fabtestsBuild, error) {
	s, err := resolveFabtestsSource(src)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(log, "fabtests: building fabtests from %s into %s\n", s, cache)
	os.Remove(filepath.Join(cache, fabtestsStamp))
	srcDir, buildDir := filepath.Join(cache, "src"), filepath.Join(cache, "build")
	for _, d := range []string{srcDir, buildDir, filepath.Join(cache, "bin"), filepath.Join(cache, "share")} {
		if err := os.RemoveAll(d); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(cache, "build.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	step := func(dir, name string, args ...string) error {
		fmt.Fprintf(logf, "\n$ (cd %s && %s %s)\n", dir, name, strings.Join(args, " "))
		c := exec.Command(name, args...)
		c.Dir, c.Stdout, c.Stderr = dir, logf, logf
		if err := c.Run(); err != nil {
			logf.Sync()
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("fabtests: %s %s in %s: %w (the log is %s; its end: %s)", name, strings.Join(args, " "), dir, err, logPath,
				lastLines(string(b), 12))
		}
		return nil
	}
	if s.gitDir != "" {
		// git archive TAG fabtests | tar -x: the tag's fabtests directory,
		// then its contents moved up into src.
		tmp := filepath.Join(cache, "src.tmp")
		os.RemoveAll(tmp)
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		archive := filepath.Join(cache, "fabtests.tar")
		defer os.Remove(archive)
		if err := step(cache, "git", "--git-dir="+s.gitDir, "archive", "-o", archive, s.tag, "fabtests"); err != nil {
			return nil, err
		}
		if err := step(tmp, "tar", "-xf", archive); err != nil {
			return nil, err
		}
		os.RemoveAll(srcDir)
		if err := os.Rename(filepath.Join(tmp, "fabtests"), srcDir); err != nil {
			return nil, err
		}
	} else if err := step(cache, "cp", "-a", s.dir+"/.", srcDir); err != nil {
		return nil, err
	}
	ac, err := os.ReadFile(filepath.Join(srcDir, "configure.ac"))
	if err != nil {
		return nil, fmt.Errorf("fabtests: source %s: %w", s, err)
	}
	m := acInitVersion.FindSubmatch(ac)
	if m == nil || string(m[1]) != fabtestsVersion {
		v := "no version"
		if m != nil {
			v = "fabtests " + string(m[1])
		}
		return nil, fmt.Errorf("fabtests: source %s is %s, want %s (Debian bookworm's libfabric 1.17): point FABTESTS_SRC at v%s, e.g. GITDIR@v%s",
			s, v, fabtestsVersion, fabtestsVersion, fabtestsVersion)
	}
	if _, err := os.Stat(filepath.Join(srcDir, "config.status")); err == nil {
		// A tree configured in place: configure refuses to build out of
		// it until it is cleaned.
		step(srcDir, "make", "distclean")
	}
	if _, err := os.Stat(filepath.Join(srcDir, "configure")); err != nil {
		if err := step(srcDir, "./autogen.sh"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		return nil, err
	}
	if err := step(buildDir, filepath.Join(srcDir, "configure"), "--prefix="+cache); err != nil {
		return nil, err
	}
	if err := step(buildDir, "make", fmt.Sprintf("-j%d", runtime.NumCPU())); err != nil {
		return nil, err
	}
	if err := step(buildDir, "make", "install"); err != nil {
		return nil, err
	}
	stamp := fmt.Sprintf("fabtests %s from %s, built %s", fabtestsVersion, s, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(cache, fabtestsStamp), []byte(stamp+"\n"), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "fabtests: built in %.0f s (log: %s)\n", time.Since(start).Seconds(), logPath)
	b, ok := fabtestsCached(cache)
	if !ok {
		return nil, fmt.Errorf("fabtests: make install into %s left no bin/runfabtests.sh or bin/fi_rdm_pingpong", cache)
	}
	return b, nil
}

// tailBuffer keeps the last max bytes written to it (a process's output),
// safe for the writer and a reader at once.
type tailBuffer struct {
	syncBuffer
	max   int
	total int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += len(p)
	t.b.Write(p)
	if t.b.Len() > 2*t.max {
		s := t.b.String()
		t.b.Reset()
		t.b.WriteString(s[len(s)-t.max:])
	}
	return len(p), nil
}

// lines returns the last n non-empty lines.
func (t *tailBuffer) lines(n int) []string {
	var out []string
	for _, l := range strings.Split(t.String(), "\n") {
		if l = strings.TrimRight(l, "\r \t"); l != "" {
			out = append(out, l)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}
