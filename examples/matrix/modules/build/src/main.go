// sum prints the sum of the integers it reads, one per line, from standard input.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	total := int64(0)
	in := bufio.NewScanner(os.Stdin)
	for n := 1; in.Scan(); n++ {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		v, err := strconv.ParseInt(line, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "line %d: %q is not an integer\n", n, line)
			os.Exit(2)
		}
		total += v
	}
	fmt.Println(total)
}
