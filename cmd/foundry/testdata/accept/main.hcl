# Three products that assemble the same scores service: durable keeps uploads in its data
# volume; forgetful only in the sandbox's /tmp, which a restart loses; careless in its
# volume, but it writes a malformed upload before refusing it. Their acceptance runs the
# same cases through the HTTP interface, with a restart between requests.
seed "bb" {
  layer {
    files = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = {
      for applet in ["sh", "cat", "head", "grep", "ls", "mkdir", "mv", "printf", "sed", "sort", "tr", "wc", "httpd"] :
      "/bin/${applet}" => "busybox"
    }
  }
  env = { PATH = "/bin", LC_ALL = "C" }
}

product "durable" {
  step "server" {
    image   = seed.bb
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "/src/build.sh", "/data/scores", "careful"]
    outputs = ["/out/srv"]
  }
  accept "service" {
    image       = seed.bb
    files       = { "/srv" = step.server.output["/out/srv"] }
    entrypoint  = ["/srv/start"]
    port        = 8080
    ready       = "/healthz"
    data        = "/data"
    input       = jsonschema("schemas/scores.json")
    errors      = { invalid_input = 400, not_found = 404 }
    equivalence = "json"
    cases       = "acceptance/*.json"
  }
}

product "forgetful" {
  step "server" {
    image   = seed.bb
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "/src/build.sh", "/tmp/scores", "careful"]
    outputs = ["/out/srv"]
  }
  accept "service" {
    image       = seed.bb
    files       = { "/srv" = step.server.output["/out/srv"] }
    entrypoint  = ["/srv/start"]
    port        = 8080
    ready       = "/healthz"
    data        = "/data"
    input       = jsonschema("schemas/scores.json")
    errors      = { invalid_input = 400, not_found = 404 }
    equivalence = "json"
    cases       = "acceptance/*.json"
  }
}

product "careless" {
  step "server" {
    image   = seed.bb
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "/src/build.sh", "/data/scores", "careless"]
    outputs = ["/out/srv"]
  }
  accept "service" {
    image       = seed.bb
    files       = { "/srv" = step.server.output["/out/srv"] }
    entrypoint  = ["/srv/start"]
    port        = 8080
    ready       = "/healthz"
    data        = "/data"
    input       = jsonschema("schemas/scores.json")
    errors      = { invalid_input = 400, not_found = 404 }
    equivalence = "json"
    cases       = "acceptance/*.json"
  }
}
