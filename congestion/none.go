package congestion

// none is no congestion control: the window is MaxWindow and nothing
// paces, the comparison that shows what the other algorithms buy. It
// still counts what it is told, so telemetry reads the same fields.
type none struct {
	cfg Config
	st  State
}

func newNone(cfg Config) *none { return &none{cfg: cfg, st: State{LastPath: -1}} }

func (n *none) OnSent(now Time, bytes int) {}

func (n *none) OnAck(now Time, s AckSample) {
	n.st.Acked += uint64(max(s.Bytes, 0))
	n.st.Marked += uint64(max(s.Marked, 0))
	n.st.LastMarked, n.st.LastPath = s.Marked, s.Path
	if s.RTT > 0 {
		n.st.LastRTT = s.RTT
	}
}

func (n *none) OnLoss(now Time, bytes int) { n.st.Lost += uint64(max(bytes, 0)) }
func (n *none) OnTimeout(now Time)         { n.st.Timeouts++ }
func (n *none) OnTick(now Time)            {}
func (n *none) Window() int                { return n.cfg.MaxWindow }
func (n *none) PacingRate() uint64         { return 0 }

func (n *none) State() State {
	s := n.st
	s.Algorithm = "none"
	s.Window = n.cfg.MaxWindow
	s.RawWindow = float64(n.cfg.MaxWindow)
	return s
}
