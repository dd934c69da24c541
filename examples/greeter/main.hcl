# A service capability. The contract says what the HTTP service must answer; the evaluator
# starts each candidate in a sandbox with only a loopback network, reaches its port from
# inside that sandbox, and judges every response. The cheaper recipe greets people by their
# first name only; a sealed case, which no builder sees, catches it.
project "greeter" {
  brief    = file("README.md")
  registry = "oci-layout:.foundry/registry"
}

capability "greeter" {
  summary     = "HTTP: POST /cgi-bin/greet {\"name\": N} answers {\"greeting\": \"Hello, N!\"}"
  equivalence = "json"
  interface "service" {
    entrypoint = ["/bin/greeter"]
    port       = 8080
    ready      = "/healthz" # polled until it answers 2xx; then the cases' requests are sent
    input      = jsonschema("schemas/name.json")
    output     = jsonschema("schemas/greeting.json")
    errors     = { invalid_input = 400 }
  }
  suite "dev" { cases = "cases/*.json" }
  suite "sealed" { cases = "sealed/*.json" } # evaluator only: no step may read sealed/
}

# Static busybox: the shell, the tools the build and the CGI script use, and httpd.
seed "busybox" {
  layer {
    files = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = {
      for applet in ["sh", "cp", "mkdir", "chmod", "echo", "head", "sed", "httpd"] :
      "/bin/${applet}" => "busybox"
    }
  }
  env = { PATH = "/bin", LC_ALL = "C" }
}

recipe "greeter-first-name" {
  provides = capability.greeter
  cost     = 1
  step "build" {
    image   = seed.busybox
    mounts  = { "/src" = dir("src/first-name"), "/common" = dir("src/common") }
    run     = ["sh", "/common/assemble.sh"]
    outputs = ["/out/srv", "/out/bin/greeter"]
  }
  package {
    base  = seed.busybox
    files = { "/srv" = step.build.output["/out/srv"], "/bin/greeter" = step.build.output["/out/bin/greeter"] }
  }
}

recipe "greeter-full-name" {
  provides = capability.greeter
  cost     = 2
  step "build" {
    image   = seed.busybox
    mounts  = { "/src" = dir("src/good"), "/common" = dir("src/common") }
    run     = ["sh", "/common/assemble.sh"]
    outputs = ["/out/srv", "/out/bin/greeter"]
  }
  package {
    base  = seed.busybox
    files = { "/srv" = step.build.output["/out/srv"], "/bin/greeter" = step.build.output["/out/bin/greeter"] }
  }
}
