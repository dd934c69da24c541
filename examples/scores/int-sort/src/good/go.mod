module int-sort

go 1.26
