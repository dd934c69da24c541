# One tool built for two platforms by a module, and tested in four shards.
module "sum" {
  for_each = toset(["linux/amd64", "linux/arm64"])
  source   = "./modules/build"
  platform = each.key
}

step "test" {
  count   = 4
  image   = module.sum["linux/amd64"].toolchain
  mounts  = { "/bin/sum" = module.sum["linux/amd64"].bin, "/t" = dir("tests") }
  run     = ["sh", "-c", "for i in ${count.index} $((${count.index}+4)); do /bin/sum < /t/$i.in | cmp - /t/$i.want; done > /out/ok"]
  outputs = ["/out/ok"]
}

step "arm64-is-aarch64" {
  image   = module.sum["linux/arm64"].toolchain
  mounts  = { "/bin/sum" = module.sum["linux/arm64"].bin }
  run     = ["sh", "-c", "test \"$(od -An -tx1 -j18 -N2 /bin/sum)\" = ' b7 00' > /out/ok"]
  outputs = ["/out/ok"]
}
