package loopback

// SetPick makes Start try the ports next gives, until the test ends.
func SetPick(t interface{ Cleanup(func()) }, next func() int) {
	old := pick
	pick = next
	t.Cleanup(func() { pick = old })
}

// FreePorts returns n ports from from upwards that no server reserves now (each reserved and
// released again to tell), so that a test's chosen ports do not meet those of a test binary
// running beside, whose Start picks ports at random in the whole range.
func FreePorts(from, n int) []int {
	var out []int
	for port := from; len(out) < n && port < PortHigh; port++ {
		if f, err := reserve(port); err == nil {
			_ = f.Close()
			out = append(out, port)
		}
	}
	return out
}
