package control

// ShrinkMapBudget leaves the daemon's mapping budget only free mappings
// above what is held now, and returns how to restore it.
func ShrinkMapBudget(free int) (restore func()) {
	resources.mu.Lock()
	resources.load()
	saved := resources.max.maps
	resources.max.maps = resources.held.maps + free
	resources.mu.Unlock()
	return func() {
		resources.mu.Lock()
		resources.max.maps = saved
		resources.mu.Unlock()
	}
}

// FreeMaps is how many mappings the budget has left.
func FreeMaps() int {
	resources.mu.Lock()
	defer resources.mu.Unlock()
	return resources.max.maps - resources.held.maps
}

// ShrinkRingBudget leaves the daemon free ring bytes above what is held
// now, and one session a share of perSession bytes; it returns how to
// restore both.
func ShrinkRingBudget(free, perSession int64) (restore func()) {
	resources.mu.Lock()
	resources.load()
	savedMax, savedPer := resources.max.ring, resources.per.ring
	resources.max.ring = resources.held.ring + free
	resources.per.ring = perSession
	resources.mu.Unlock()
	return func() {
		resources.mu.Lock()
		resources.max.ring, resources.per.ring = savedMax, savedPer
		resources.mu.Unlock()
	}
}

// BudgetHeld is what every session holds: descriptors, ring bytes and
// registered bytes.
func BudgetHeld() (fds int, ring, regd int64) {
	resources.mu.Lock()
	defer resources.mu.Unlock()
	return resources.held.fds, resources.held.ring, resources.held.regd
}

// ShrinkRegBudget leaves the daemon free registered bytes above what is
// held now, and returns how to restore it.
func ShrinkRegBudget(free int64) (restore func()) {
	resources.mu.Lock()
	resources.load()
	saved := resources.max.regd
	resources.max.regd = resources.held.regd + free
	resources.mu.Unlock()
	return func() {
		resources.mu.Lock()
		resources.max.regd = saved
		resources.mu.Unlock()
	}
}
