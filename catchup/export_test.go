package catchup

import "time"

// OnPaced has f told each time a resume call takes its turn (the clock's
// reading the pace was decided on), so a test reads the pace off the
// decisions and not off when a goroutine got to run afterwards.
func OnPaced(o *Options, f func(dest string, at time.Time)) { o.paced = f }
