package control

// ShrinkMapBudget leaves the daemon's mapping budget only free mappings
// above what is held now, and returns how to restore it.
func ShrinkMapBudget(free int) (restore func()) {
	resources.mu.Lock()
	resources.load()
	saved := resources.maxMaps
	resources.maxMaps = resources.maps + free
	resources.mu.Unlock()
	return func() {
		resources.mu.Lock()
		resources.maxMaps = saved
		resources.mu.Unlock()
	}
}

// FreeMaps is how many mappings the budget has left.
func FreeMaps() int {
	resources.mu.Lock()
	defer resources.mu.Unlock()
	return resources.maxMaps - resources.maps
}
