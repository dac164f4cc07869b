package sim

import (
	"encoding/json"
	"testing"
)

func TestFabricQuick(t *testing.T) {
	for _, w := range []string{WorkAllToAll, WorkPermutation, WorkRing, WorkHD, WorkIncast} {
		res, err := RunFabric(FabricConfig{Clos: ClosConfig{Hosts: 16, Seed: 1}, Workload: w, Size: 32 << 10})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res)
		t.Logf("%s", b)
	}
}
