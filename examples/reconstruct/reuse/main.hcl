# A second project that needs the same capability. It has no recipe and no reconstruct
# block: the contract below (name, interface, equivalence, schema) has the same digest as
# ../main.hcl's, so the version admitted there, in the registry both name, is pinned.
project "reuse" {
  registry = "oci-layout:../.foundry/registry"
}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox" }
  }
  env = { PATH = "/bin" }
}

capability "sorter" {
  summary     = "Sort a JSON array of integers ascending, keeping duplicates"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sorter"]
    input      = jsonschema("schemas/ints.json") # a copy of ../schemas/ints.json
    output     = jsonschema("schemas/ints.json")
  }
}

step "sort" {
  image   = seed.busybox
  mounts  = { "/sorter" = capability.sorter }
  env     = { PATH = "/sorter/bin:/bin" } # the sorter's tr, sort, sed come with it
  run     = ["sh", "-c", "echo '[1000, 200, 30, 4]' | /sorter/bin/sorter > /out/sorted.json"]
  outputs = ["/out/sorted.json"]
}
