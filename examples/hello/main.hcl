# A four-step text pipeline on a busybox seed. Run it from this directory:
#   foundry plan      # what would run, and why
#   foundry apply     # run it in sandboxes
project "hello" {
  brief = file("README.md")
}

variable "top" {
  type        = number
  default     = 3
  description = "how many of the most frequent words to report"
}

# The seed is the host's static busybox plus the applet links the steps use. It is hashed,
# never built: change /bin/busybox and every step below gets a new digest.
seed "busybox" {
  layer {
    files = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = {
      for applet in ["sh", "cat", "tr", "sort", "uniq", "head", "wc", "grep", "sed", "echo"] :
      "/bin/${applet}" => "busybox"
    }
  }
  env = { PATH = "/bin", LC_ALL = "C" }
}

step "words" {
  description = "split the texts into lower-case words, one per line"
  image       = seed.busybox
  mounts      = { "/text" = dir("text") }
  run         = ["sh", "-c", "cat /text/*.txt | tr -cs 'A-Za-z' '\\n' | tr 'A-Z' 'a-z' | grep -v '^$' > /out/words.txt"]
  outputs     = ["/out/words.txt"]
}

step "count" {
  description = "count each word"
  image       = seed.busybox
  mounts      = { "/in/words.txt" = step.words.output["/out/words.txt"] }
  run         = ["sh", "-c", "sort /in/words.txt | uniq -c | sort -rn -k1,1 -k2 > /out/counts.txt"]
  outputs     = ["/out/counts.txt"]
}

step "top" {
  description = "keep the most frequent words"
  image       = seed.busybox
  mounts      = { "/in/counts.txt" = step.count.output["/out/counts.txt"] }
  run         = ["sh", "-c", "head -n ${var.top} /in/counts.txt > /out/top.txt"]
  outputs     = ["/out/top.txt"]
  limits {
    memory = "64MiB"
    time   = "30s"
  }
}

step "report" {
  description = "write the report"
  image       = seed.busybox
  mounts = {
    "/in/top.txt"   = step.top.output["/out/top.txt"]
    "/in/words.txt" = step.words.output["/out/words.txt"]
  }
  run     = ["sh", "-c", "echo \"$(wc -l < /in/words.txt) words; the top ${var.top}:\" > /out/report.txt && cat /in/top.txt >> /out/report.txt"]
  outputs = ["/out/report.txt"]
}
