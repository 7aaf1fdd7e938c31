module github.com/veerhq/veer/bench

go 1.26.0

replace github.com/veerhq/veer => ../
