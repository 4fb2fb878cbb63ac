package bench

import "golang.org/x/exp/stats"

// median and quantiles come from golang.org/x/exp/stats (linear
// interpolation, Hyndman–Fan R-7, the same definition the driver uses).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return stats.Median(xs)
}

func quantiles(xs []float64, qs ...float64) []float64 {
	if len(xs) == 0 {
		return make([]float64, len(qs))
	}
	return stats.Quantiles(xs, qs...)
}
