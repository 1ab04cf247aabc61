package redis

import (
	"strconv"

	"github.com/limiter-dev/limiter/ratelimits/bucket"
	"github.com/limiter-dev/limiter/ratelimits/calendar"
	"github.com/limiter-dev/limiter/ratelimits/window"
)

// A calendar op is counted as a fixed window whose bounds Go finds: the
// service finds the period at its own now (which it passes to the
// script), names the period in the key (calendarName), and passes the
// period's end where a window op passes its period. The counter is
// stored in the window counters' form as a counter of period 1 at index
// end − 2, "1:<end−2>:<hits>:0", which the script's window functions
// (and the format v2 sweep) read as expiring exactly at the period's end;
// docs/redis.md describes it.

// calendarPeriod is a calendar op's period at now (unix ns).
func calendarPeriod(op *bucket.Op, now int64) calendar.Period {
	return op.Periods.At(bucket.Millis(now))
}

// calendarName is the name of a calendar op's counter at now: the name
// its bucket would have (name, in the bucket's slot), followed by
// "@<unit>@<zone>@<start>", so that a counter of another period, unit or
// zone is another key, never read. No name of another kind has an '@'
// after its hash tag's '}'.
func calendarName(name string, op *bucket.Op, now int64) string {
	p := calendarPeriod(op, now)
	b := make([]byte, 0, len(name)+48)
	b = append(b, name...)
	b = append(b, '@')
	b = append(b, op.Periods.Unit().String()...)
	b = append(b, '@')
	b = append(b, op.Periods.Zone()...)
	b = append(b, '@')
	b = strconv.AppendInt(b, p.Start, 10)
	return string(b)
}

// calendarStored is the window counter a calendar counter c is stored as.
func calendarStored(c calendar.Counter) window.Counter {
	if c.Used <= 0 {
		return window.Counter{}
	}
	return window.Counter{Period: 1, Start: c.End - 2, Cur: c.Used}
}

// calendarRead is the calendar counter of op at now that the stored
// window counter w holds: its hits when w is the counter of the period
// at now, none otherwise.
func calendarRead(op *bucket.Op, now int64, w window.Counter) calendar.Counter {
	p := calendarPeriod(op, now)
	if w.Period != 1 || w.Start != p.End-2 || w.Cur <= 0 || p.End <= bucket.Millis(now) {
		return calendar.Counter{}
	}
	return calendar.Counter{Tag: op.Calendar.Tag, Start: p.Start, End: p.End, Used: w.Cur}
}
