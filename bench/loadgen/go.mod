module alertd-bench

go 1.26
