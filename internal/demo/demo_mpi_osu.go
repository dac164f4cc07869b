package demo

// Finding or building the OSU micro-benchmarks for `metaroce demo
// -topology mpi`: a finished build in a cache directory, else one made
// from the source the user points at (OSU_SRC or -osu-src: a source tree
// or a git directory), configured with Open MPI's mpicc and built out of
// tree into the cache. No OSU code lives in this repository.

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

// osuDefaultCache is where a build is kept between runs.
const osuDefaultCache = "/var/cache/metaroce/osu"

// osuStamp, in the cache, says the build finished and what it was built
// from.
const osuStamp = "BUILT"

// osuPrograms are the benchmarks the demo runs, under the install's
// libexec/osu-micro-benchmarks/mpi/.
var osuPrograms = map[string]string{
	"osu_latency":   "pt2pt/osu_latency",
	"osu_bw":        "pt2pt/osu_bw",
	"osu_allreduce": "collective/osu_allreduce",
	"osu_alltoall":  "collective/osu_alltoall",
	"osu_bcast":     "collective/osu_bcast",
	"osu_allgather": "collective/osu_allgather",
}

// errOSUMissing: no build in the cache and no source to build one from.
// The demo says so and runs the rest; its test skips the OSU part.
var errOSUMissing = errors.New("the OSU micro-benchmarks are missing")

// osuBuild is a usable build: the benchmarks under Dir (DIR/pt2pt/osu_bw),
// what it was built from and the version configure.ac names.
type osuBuild struct {
	Dir     string
	Source  string
	Version string
}

func (b *osuBuild) program(name string) string { return filepath.Join(b.Dir, osuPrograms[name]) }

// osuCached returns the build in cache if a finished one is there.
func osuCached(cache string) (*osuBuild, bool) {
	stamp, err := os.ReadFile(filepath.Join(cache, osuStamp))
	if err != nil {
		return nil, false
	}
	b := &osuBuild{Dir: filepath.Join(cache, "libexec", "osu-micro-benchmarks", "mpi")}
	for _, p := range osuPrograms {
		if _, err := os.Stat(filepath.Join(b.Dir, p)); err != nil {
			return nil, false
		}
	}
	// The stamp: "osu-micro-benchmarks VERSION from SOURCE, built TIME".
	s := strings.TrimSpace(string(stamp))
	if f := strings.Fields(s); len(f) > 1 {
		b.Version = f[1]
	}
	if _, from, ok := strings.Cut(s, " from "); ok {
		b.Source, _, _ = strings.Cut(from, ", built")
	}
	return b, true
}

// osuFindOrBuild returns the cached build, or builds one from src when
// there is none (or rebuild). With neither it returns errOSUMissing
// wrapped in a message saying how to provide the suite.
func osuFindOrBuild(src, cache string, rebuild bool, log io.Writer) (*osuBuild, error) {
	if b, ok := osuCached(cache); ok && !rebuild {
		return b, nil
	}
	if src == "" {
		return nil, fmt.Errorf("%w: no build in %s and no source to build one from. "+
			"Point OSU_SRC (or -osu-src) at an OSU micro-benchmarks source tree (with configure.ac or configure) "+
			"or a git directory of one (DIR or DIR@REF); the demo builds it once with mpicc into %s. "+
			"Sources: https://mvapich.cse.ohio-state.edu/benchmarks/", errOSUMissing, cache, cache)
	}
	if err := osuTools(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, fmt.Errorf("osu: cache: %w", err)
	}
	// One build at a time in a cache: a second demo waits for the
	// first's build, then uses it.
	unlock, err := osuLock(cache)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if b, ok := osuCached(cache); ok && !rebuild {
		return b, nil
	}
	return osuMake(src, cache, log)
}

func osuLock(dir string) (func(), error) {
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

// osuToolDeps are what autoreconf, configure and make need, as
// scripts/deps.sh lists its dependencies: a command and the Debian
// package that ships it.
var osuToolDeps = [][2]string{{"autoreconf", "autoconf"}, {"automake", "automake"}, {"libtoolize", "libtool"},
	{"make", "make"}, {"tar", "tar"}, {"git", "git"}, {"mpicc", "libopenmpi-dev"}}

// osuTools installs what building the suite needs and this machine lacks,
// by package name through apt-get as scripts/deps.sh does (root only),
// and otherwise names the packages.
func osuTools() error {
	missing := func() []string {
		var m []string
		for _, e := range osuToolDeps {
			if _, err := exec.LookPath(e[0]); err != nil {
				m = append(m, e[1])
			}
		}
		return m
	}
	m := missing()
	if len(m) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return fmt.Errorf("osu: building the OSU micro-benchmarks needs the Debian packages %s: apt-get install %s",
			strings.Join(m, " "), strings.Join(m, " "))
	}
	fmt.Fprintf(os.Stderr, "osu: installing the Debian packages the build needs and this machine lacks: %s\n", strings.Join(m, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	up := exec.Command("apt-get", "update", "-q")
	up.Env = env
	up.Run()
	in := exec.Command("apt-get", append([]string{"install", "-y", "-q", "--no-install-recommends"}, m...)...)
	in.Env = env
	if b, err := in.CombinedOutput(); err != nil {
		return fmt.Errorf("osu: apt-get install %s: %v: %s", strings.Join(m, " "), err, lastLines(string(b), 4))
	}
	if m = missing(); len(m) > 0 {
		return fmt.Errorf("osu: still missing after apt-get: %s", strings.Join(m, " "))
	}
	return nil
}

// osuSource is a source tree to copy, or a git directory and a revision
// to archive.
type osuSource struct {
	dir    string
	gitDir string
	ref    string
}

func (s osuSource) String() string {
	if s.gitDir != "" {
		return s.gitDir + "@" + s.ref
	}
	return s.dir
}

// resolveOSUSource reads OSU_SRC: a source tree (c/mpi/pt2pt/osu_latency.c
// and configure.ac or configure), or a git directory (bare, a checkout's
// .git or the checkout itself) with an optional @REF (HEAD when left out).
func resolveOSUSource(src string) (osuSource, error) {
	path, ref := src, ""
	if i := strings.LastIndex(src, "@"); i > 0 {
		if _, err := os.Stat(src); err != nil {
			path, ref = src[:i], src[i+1:]
		}
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.IsDir() {
		return osuSource{}, fmt.Errorf("osu: source %q: not a directory", path)
	}
	isGit := func(d string) bool {
		_, e1 := os.Stat(filepath.Join(d, "HEAD"))
		_, e2 := os.Stat(filepath.Join(d, "objects"))
		return e1 == nil && e2 == nil
	}
	isTree := func(d string) bool {
		_, e1 := os.Stat(filepath.Join(d, "c", "mpi", "pt2pt", "osu_latency.c"))
		_, e2 := os.Stat(filepath.Join(d, "configure.ac"))
		_, e3 := os.Stat(filepath.Join(d, "configure"))
		return e1 == nil && (e2 == nil || e3 == nil)
	}
	gitDir := ""
	switch {
	case isGit(path):
		gitDir = path
	case isGit(filepath.Join(path, ".git")):
		gitDir = filepath.Join(path, ".git")
	}
	if ref != "" || (gitDir != "" && !isTree(path)) {
		if gitDir == "" {
			return osuSource{}, fmt.Errorf("osu: source %q: @%s given but %s is no git directory", src, ref, path)
		}
		if ref == "" {
			ref = "HEAD"
		}
		return osuSource{gitDir: gitDir, ref: ref}, nil
	}
	if isTree(path) {
		return osuSource{dir: path}, nil
	}
	return osuSource{}, fmt.Errorf("osu: source %q: neither an OSU micro-benchmarks tree (c/mpi/pt2pt/osu_latency.c, configure.ac) nor a git directory", src)
}

var osuACInit = regexp.MustCompile(`AC_INIT\(\[OSU-Micro-Benchmarks\],\s*\[([^\]]+)\]`)

// osuMake builds the suite from src into cache: the sources copied to
// cache/src (autoreconf writes into its tree), configured with CC=mpicc
// and compiled in cache/build, installed with prefix cache (the programs
// land in cache/libexec/osu-micro-benchmarks/mpi). The log is
// cache/build.log.
func osuMake(src, cache string, log io.Writer) (*osuBuild, error) {
	s, err := resolveOSUSource(src)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(log, "osu: building the OSU micro-benchmarks from %s into %s (once; a few minutes)\n", s, cache)
	os.Remove(filepath.Join(cache, osuStamp))
	srcDir, buildDir := filepath.Join(cache, "src"), filepath.Join(cache, "build")
	for _, d := range []string{srcDir, buildDir, filepath.Join(cache, "libexec")} {
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
			return fmt.Errorf("osu: %s %s in %s: %w (the log is %s; its end: %s)", name, strings.Join(args, " "), dir, err, logPath,
				lastLines(string(b), 12))
		}
		return nil
	}
	if s.gitDir != "" {
		archive := filepath.Join(cache, "osu.tar")
		defer os.Remove(archive)
		if err := step(cache, "git", "--git-dir="+s.gitDir, "archive", "-o", archive, s.ref); err != nil {
			return nil, err
		}
		if err := step(srcDir, "tar", "-xf", archive); err != nil {
			return nil, err
		}
	} else if err := step(cache, "cp", "-a", s.dir+"/.", srcDir); err != nil {
		return nil, err
	}
	version := "unknown"
	if ac, err := os.ReadFile(filepath.Join(srcDir, "configure.ac")); err == nil {
		if m := osuACInit.FindSubmatch(ac); m != nil {
			version = string(m[1])
		}
	}
	if _, err := os.Stat(filepath.Join(srcDir, "configure")); err != nil {
		if err := step(srcDir, "autoreconf", "--install"); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(buildDir, 0o755); err != nil {
		return nil, err
	}
	if err := step(buildDir, filepath.Join(srcDir, "configure"), "CC=mpicc", "CXX=mpicxx", "--prefix="+cache); err != nil {
		return nil, err
	}
	if err := step(buildDir, "make", fmt.Sprintf("-j%d", runtime.NumCPU())); err != nil {
		return nil, err
	}
	if err := step(buildDir, "make", "install"); err != nil {
		return nil, err
	}
	stamp := fmt.Sprintf("osu-micro-benchmarks %s from %s, built %s", version, s, time.Now().UTC().Format(time.RFC3339))
	if err := os.WriteFile(filepath.Join(cache, osuStamp), []byte(stamp+"\n"), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "osu: built in %.0f s (log: %s)\n", time.Since(start).Seconds(), logPath)
	b, ok := osuCached(cache)
	if !ok {
		return nil, fmt.Errorf("osu: make install into %s left some of %v missing under libexec/osu-micro-benchmarks/mpi", cache, osuProgramNames())
	}
	return b, nil
}

func osuProgramNames() []string {
	var n []string
	for k := range osuPrograms {
		n = append(n, k)
	}
	return n
}
