// Package cli holds the conventions every metaroce and metaroced command
// follows, so a flag means the same thing and fails the same way
// everywhere:
//
//   - -h and -help print the usage to standard output and exit 0; a bad
//     flag prints the error and the usage to standard error and exits 2
//     (Main).
//   - Durations take a unit (10ms, 2us, 1.5s) and sizes take bytes with an
//     optional binary suffix (65536, 64KiB, 1MiB); a bare number where a
//     duration is wanted is refused with an example.
//   - Every value with a range is checked after parsing (Check), and the
//     refusal names the flag, the value and the valid range.
//   - An error is printed once, prefixed once with the command's name.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrUsage marks an error in the command line (as opposed to a failure
// while running): Main exits 2 for it.
var ErrUsage = errors.New("usage")

// UsageError is a command-line error naming the flag.
func UsageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, args...))
}

// NewFlagSet is a flag set that reports errors instead of exiting and
// prints its usage to out (standard output for -h, so `cmd -h | less`
// works).
func NewFlagSet(name string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return fs
}

// Parse parses args into fs. -h prints the usage to the flag set's output
// and returns flag.ErrHelp; any other error is returned as a usage error
// that names the flag and says where the flags are listed (the usage is
// not dumped beside it: the error is the news).
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return err
		}
		return fmt.Errorf("%w: %v (run '%s -h' for the flags)", ErrUsage, err, fs.Name())
	}
	if fs.NArg() > 0 {
		return UsageError("unexpected argument %q (flags go before nothing else; see %s -h)", fs.Arg(0), fs.Name())
	}
	return nil
}

// Exit maps a command's error to an exit code, printing it once as
// "name: error": nil and -h exit 0, usage errors 2, failures 1.
func Exit(name string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		msg := strings.TrimPrefix(err.Error(), ErrUsage.Error()+": ")
		fmt.Fprintf(stderr, "%s: %s\n", name, trimPrefix(msg, name))
		return 2
	default:
		fmt.Fprintf(stderr, "%s: %s\n", name, trimPrefix(err.Error(), name))
		return 1
	}
}

// trimPrefix drops a leading "name: " (or "metaroce: ") an error already
// carries, so the printed line has one.
func trimPrefix(msg, name string) string {
	prefixes := []string{name + ": ", "metaroce: "}
	if i := strings.LastIndexByte(name, ' '); i >= 0 {
		prefixes = append(prefixes, name[i+1:]+": ") // "sim: " under "metaroce sim"
	}
	for _, p := range prefixes {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// Main runs a command and exits with its code.
func Main(name string, run func() error) {
	os.Exit(Exit(name, run(), os.Stderr))
}

// Duration is a flag value that must carry a unit.
type Duration struct{ D *time.Duration }

// DurationVar defines a duration flag whose value must carry a unit.
func DurationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(Duration{p}, name, usage)
}

func (d Duration) String() string {
	if d.D == nil {
		return "0s"
	}
	return d.D.String()
}

func (d Duration) Set(s string) error {
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return fmt.Errorf("%q has no unit: write it as %sus, %sms or %ss", s, s, s, s)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (examples: 500us, 10ms, 1.5s)", s)
	}
	*d.D = v
	return nil
}

// Size is a byte count flag: a plain number of bytes or one with a binary
// suffix (KiB, MiB, GiB; K, M and G mean the same here).
type Size struct{ N *int64 }

// SizeVar defines a size flag.
func SizeVar(fs *flag.FlagSet, p *int64, name string, value int64, usage string) {
	*p = value
	fs.Var(Size{p}, name, usage)
}

// IntSizeVar is SizeVar for an int.
func IntSizeVar(fs *flag.FlagSet, p *int, name string, value int, usage string) {
	*p = value
	fs.Var(intSize{p}, name, usage)
}

func (s Size) String() string {
	if s.N == nil {
		return "0"
	}
	return FormatSize(*s.N)
}

func (s Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s.N = n
	return nil
}

type intSize struct{ n *int }

func (s intSize) String() string {
	if s.n == nil {
		return "0"
	}
	return FormatSize(int64(*s.n))
}

func (s intSize) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	if n > int64(^uint(0)>>1) {
		return fmt.Errorf("%q is too large", v)
	}
	*s.n = int(n)
	return nil
}

var suffixes = []struct {
	s string
	m int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}}

// ParseSize reads "65536", "64KiB", "1.5MiB" or "4K".
func ParseSize(v string) (int64, error) {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, s := range suffixes {
		if strings.HasSuffix(num, s.s) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, s.s)), s.m
			break
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("%q is negative", v)
		}
		if mult > 1 && n > (1<<62)/mult {
			return 0, fmt.Errorf("%q is too large", v)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (examples: 4096, 64KiB, 1MiB)", v)
	}
	n := f * float64(mult)
	if n != float64(int64(n)) {
		return 0, fmt.Errorf("%q is not a whole number of bytes", v)
	}
	return int64(n), nil
}

// FormatSize prints n with the largest binary suffix that divides it.
func FormatSize(n int64) string {
	for _, s := range suffixes[:3] {
		if n >= s.m && n%s.m == 0 {
			return strconv.FormatInt(n/s.m, 10) + s.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// Range is one flag's valid interval, checked by Check.
type Range struct {
	Flag     string
	Value    float64
	Min, Max float64 // inclusive
	// Open excludes Max (a probability below 1).
	Open bool
}

// Int is a Range for an integer flag.
func Int(flag string, v, min, max int) Range {
	return Range{Flag: flag, Value: float64(v), Min: float64(min), Max: float64(max)}
}

// Prob is a Range for a probability in [0, 1).
func Prob(flag string, v float64) Range {
	return Range{Flag: flag, Value: v, Min: 0, Max: 1, Open: true}
}

// Check refuses the first value outside its range, naming the flag, the
// value and the range.
func Check(rs ...Range) error {
	for _, r := range rs {
		if r.Value < r.Min || r.Value > r.Max || (r.Open && r.Value == r.Max) {
			hi := "]"
			if r.Open {
				hi = ")"
			}
			return UsageError("-%s %s: want a value in [%s, %s%s", r.Flag, num(r.Value), num(r.Min), num(r.Max), hi)
		}
	}
	return nil
}

// num prints a range's number in full (1073741824, 0.001), never in
// exponent form.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// Rate is a bit rate flag: bits per second, plain or with a decimal
// suffix, as tc writes them (250Mbit, 1Gbit, 100kbit; Mb/s and Gb/s too).
type Rate struct{ Bps *uint64 }

// RateVar defines a bit rate flag.
func RateVar(fs *flag.FlagSet, p *uint64, name string, value uint64, usage string) {
	*p = value
	fs.Var(Rate{p}, name, usage)
}

var rateSuffixes = []struct {
	s string
	m float64
}{{"Gbit", 1e9}, {"Gb/s", 1e9}, {"Mbit", 1e6}, {"Mb/s", 1e6}, {"kbit", 1e3}, {"kb/s", 1e3}, {"bit", 1}, {"b/s", 1}}

func (r Rate) String() string {
	if r.Bps == nil {
		return "0"
	}
	v := float64(*r.Bps)
	for _, s := range rateSuffixes[:6:6] {
		if v >= s.m && v/s.m == float64(int64(v/s.m)) && strings.HasSuffix(s.s, "bit") {
			return strconv.FormatInt(int64(v/s.m), 10) + s.s
		}
	}
	return strconv.FormatUint(*r.Bps, 10)
}

// CheckRate refuses a bit rate outside [min, max], naming the flag and
// the range as a rate flag takes them (250Mbit, 1Gbit).
func CheckRate(flag string, v, min, max uint64) error {
	if v < min || v > max {
		return UsageError("-%s %s: want a rate from %s to %s", flag, Rate{&v}, Rate{&min}, Rate{&max})
	}
	return nil
}

func (r Rate) Set(v string) error {
	num, mult := strings.TrimSpace(v), 1.0
	for _, s := range rateSuffixes {
		if strings.HasSuffix(num, s.s) {
			num, mult = strings.TrimSuffix(num, s.s), s.m
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || f*mult > 1e15 {
		return fmt.Errorf("%q is not a bit rate (examples: 250Mbit, 1Gbit, 400Gb/s)", v)
	}
	*r.Bps = uint64(f * mult)
	return nil
}
