package client

// Completion notification through a descriptor, for an application that
// waits on many things at once (epoll, poll, select, or Go's netpoller
// through a wrapper): the counterpart of ibv_req_notify_cq with a
// completion channel, libfabric's FI_WAIT_FD and fi_control(FI_GETWAIT).
//
// The descriptor is the queue pair's doorbell end, which becomes readable
// when the engine rings it, and the engine rings it only when the
// completion queue's need-wakeup flag is set (ring's protocol), so the
// sequence is the verbs one:
//
//	if armed, _ := q.ReqNotify(); armed {
//		epoll_wait(...)      // until q.FD() is readable
//		q.AckNotify()
//	}
//	q.PollCQ(...)            // always poll after: a wake-up is a hint
//
// ReqNotify refuses to arm (false) when the completion queue already has
// entries, so no completion can slip in between the last poll and the
// sleep unseen. Connection events come through the completion queue and
// wake the descriptor alike.

// FD is the queue pair's notification descriptor: readable after
// ReqNotify once the completion queue has an entry. It belongs to the QP
// (closed by Destroy); do not read from it or close it, and do not pass
// it to os.NewFile (that would take ownership).
// On a shared CQ it is the CQ's (CQ.FD).
func (q *QP) FD() int {
	if q.shared != nil {
		return q.shared.FD()
	}
	return q.bell.FD()
}

// ReqNotify arms the notification: the next completion or event makes
// FD readable. It reports false, without arming, when entries are there
// already (poll them first): in the completion queue, or completions
// PollEvent set aside. Events already in the event queue do not count
// (PollEvent takes them).
func (q *QP) ReqNotify() (bool, error) {
	if q.shared != nil {
		return false, ErrSharedCQ
	}
	if len(q.stash) > 0 {
		return false, nil
	}
	ready, err := q.cqc.Arm()
	if ready || err != nil {
		q.cqc.Disarm()
		return false, err
	}
	return true, nil
}

// AckNotify clears a readable FD and disarms the notification (the
// engine stops ringing until the next ReqNotify).
func (q *QP) AckNotify() {
	if q.cqc == nil {
		return
	}
	q.cqc.Disarm()
	q.bell.Clear()
}
