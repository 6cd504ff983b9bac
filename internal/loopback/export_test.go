package loopback

// SetPick makes Start try the ports next gives, until the test ends.
func SetPick(t interface{ Cleanup(func()) }, next func() int) {
	old := pick
	pick = next
	t.Cleanup(func() { pick = old })
}
