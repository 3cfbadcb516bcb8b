// `node --import ./test/support/codeCacheProbe.mjs bin/gateway`: records, for each script compiled
// with a V8 code cache (dist/bundle/gateway.mjs compiling serve.cjs), whether V8 took it and V8's
// tag for the process's flags, one JSON line each, in the file named by CODE_CACHE_PROBE_OUT.
// test/serve-code-cache.process.test.ts reads it: what the loader did, seen from inside the process.
import { appendFileSync } from "node:fs"
import v8 from "node:v8"
import vm from "node:vm"

const out = process.env.CODE_CACHE_PROBE_OUT
const Script = vm.Script
vm.Script = class extends Script {
  constructor(code, options) {
    super(code, options)
    if (out && options?.cachedData)
      appendFileSync(
        out,
        `${JSON.stringify({ filename: options.filename, rejected: this.cachedDataRejected, tag: v8.cachedDataVersionTag() })}\n`
      )
  }
}
