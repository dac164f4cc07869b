// Package congestion holds MetaRoCE's congestion controllers: pure state
// machines that turn what acks report (bytes acked, RTT samples from
// echoed timestamps, CE marks, losses, the receiver's rate hint) into a
// window and a pacing rate. They never read a clock, start a goroutine or
// allocate after construction; every call carries the time, so the same
// code runs in unit tests, in sim/ on virtual time and in the engine.
//
// # How the transport feeds a Controller
//
// A connection owns one Controller, built by name through New (never
// constructed inline; the daemon's config validates names with Known).
// The engine goroutine that owns the connection calls it:
//
//   - fast loop, per ack: OnAck with an AckSample (newly acked bytes, the
//     RTT sample, CE-marked bytes among them, the path, the hint, bytes
//     in flight); OnSent per packet (DCQCN's byte counter counts them);
//     OnLoss when the loss detector gives up on bytes; OnTimeout on RTO.
//     After any of them the sender reads Window() (bytes it may have in
//     flight, never below one MSS) and PacingRate() (bits/s for the
//     pacer; 0 = unpaced).
//   - slow loop, per tick (every few RTTs): OnTick, which only moves
//     time-driven state (DCQCN's timers, hint expiry) forward for an idle
//     connection, and State() for telemetry. Timers are evaluated lazily
//     at the start of every call, so a missed tick changes nothing.
//
// Path-level reaction (a marked or slow path gets less of the spray) stays
// in the transport, which sees the same per-path signals first; the
// controllers act on the connection as a whole.
//
// # metaroce (the default)
//
// A window aimed at a target delay, Swift-style (Kumar et al., SIGCOMM
// 2020): target = min(min RTT, BaseRTT) + TargetQueue + flow scaling (up
// to FlowScaleRange more for small windows, Swift's 1/sqrt(window) curve,
// which is what converges shares). BaseRTT caps the base because a flow
// that joins a standing queue would otherwise count the queue as its base
// and never yield. Each ack whose RTT is below target grows the window by
// AI MSS per RTT (AI x MSS x acked / window), if the window is in use
// (in flight at least half of it, RFC 7661). Both congestion signals are
// judged once per observation window of one srtt, as in DCTCP (Alizadeh
// et al., SIGCOMM 2010): the delay signal asks for a cut of Beta x the
// window's average (RTT - target) / RTT; the ECN signal moves alpha by
// G = 1/16 towards the window's marked fraction and, if there were marks,
// asks for a cut of alpha/2; the deeper cut is applied, bounded by MaxMD:
// at most one cut per RTT. (Averaging over the window, not cutting on the
// first sample above target, is what keeps flows from phase-locking: the
// first flow to see a queue would otherwise cut alone, every round.)
// Marked bytes earn no increase. A loss cuts by MaxMD (once per RTT); a
// timeout collapses the window to one MSS and slow-starts back to half of
// where it was.
//
// The window lives between MinWindow (a fraction of one packet) and
// MaxWindow. Window() is never below one MSS, so a packet may always be in
// flight; below one MSS the window is a rate instead: the pacer sends one
// packet every srtt x MSS / window, which is how thousands of senders
// share a downlink whose BDP is a few hundred packets. Above one MSS the
// pacing rate is window / srtt x PacingGain (1.2), so a window is spread
// over most of an RTT rather than burst at line rate. A live receiver hint
// caps the pacing rate.
//
// # receiver-hint
//
// The receiver runs a FairShare over its downlink and returns each
// sender's share in every ack (spec's RateHint). While a hint is fresh
// (younger than LifetimeRTTs smoothed RTTs) the sender paces at it,
// scaled by target/RTT while the RTT is above the target delay (which
// drains the queue the first, hint-less RTT of an incast built), with a
// window of hint x srtt x 1.25; otherwise it is metaroce, whose window it
// keeps at the hint's so that losing the hint is smooth.
//
// # dcqcn
//
// DCQCN's reaction point (Zhu et al., SIGCOMM 2015) with marked acks as
// CNPs (one per CNPInterval at most): rate cut by alpha/2 per CNP, alpha
// decaying every AlphaTimer, recovery by fast recovery, additive and
// hyper increase driven by a rate timer and a byte counter. It is
// rate-based; its window is rate x srtt x 2, only a bound. The rocev2
// baseline uses it.
//
// # none
//
// A fixed MaxWindow and no pacing: the comparison.
package congestion
