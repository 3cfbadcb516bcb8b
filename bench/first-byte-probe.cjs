// Preloaded (--require) into the floor or the gateway by bench/first-byte.mjs: times each stream
// request of the rig's load inside the process, from node's and undici's diagnostics channels,
// matched by the request's `x-first-byte-id` header (and the same id in its body's `user`, which
// the gateway forwards upstream):
//   head   `http.server.request.start`: the request's head parsed
//   sync   the first microtask after it: the callback that read the head has returned and the
//          ticks it queued have run (the body's `end` among them when the body came with the
//          head); what runs later runs in promise callbacks or later turns
//   bodyEnd the request's body read to its end by the target (its `end` event, heard before the
//          target's own listeners: a stream emits it once its reader has taken the last byte, so
//          this is when the target read the body, a tick after, not when it arrived); what the
//          target does from here to `up` is its admission of the whole request
//   check  the first check-phase callback after it: the turn's I/O done
//   up     the upstream request made (`undici:request:create` in the gateway, node's
//          `http.client.request.start` in the floor)
//   sent   its head written to the upstream's socket (undici's `undici:client:sendHeaders`; the
//          floor's http client has no such channel)
//   upHead the upstream's head received (`undici:request:headers`)
//   out    the answer's first write to the client (`ServerResponse`'s write or end, wrapped here)
// All in milliseconds from `head`, which is also given on the machine's clock (`at`) and on the
// monotonic clock (`mono`, µs, the clock `perf record -k mono` stamps with: first-byte.mjs --perf).
// SIGUSR2 writes the requests seen so far to FIRST_BYTE_PROBE_OUT (a JSON array) and forgets them.
// Nothing runs for requests without the header.
"use strict"
const dc = require("node:diagnostics_channel")
const fs = require("node:fs")

const now = () => performance.now()
const rows = new Map()
// With each stamp, the event loop's idle time so far (ms, node's own count of the time spent
// waiting for I/O): what a phase waited, against what it ran.
const at = (r, field) => {
  if (r !== undefined && r[field] === undefined) {
    r[field] = now() - r.t0
    r[`${field}Idle`] = performance.eventLoopUtilization().idle
  }
}
const header = (value) => (Array.isArray(value) ? value[0] : value)
const idInBody = (body) => {
  const text = typeof body === "string" ? body : Buffer.isBuffer(body) ? body.toString("latin1") : ""
  return /"user":"([^"]+)"/.exec(text)?.[1]
}

dc.subscribe("http.server.request.start", ({ request }) => {
  const id = header(request.headers["x-first-byte-id"])
  if (id === undefined) return
  const t0 = now()
  // On the machine's clock too (the rig's stamps are): where the head falls after the client's send.
  const r = { id, t0, at: performance.timeOrigin + t0, mono: Number(process.hrtime.bigint()) / 1e3 }
  rows.set(id, r)
  queueMicrotask(() => at(r, "sync"))
  request.once("end", () => at(r, "bodyEnd"))
  setImmediate(() => at(r, "check"))
})
dc.subscribe("undici:request:create", ({ request }) => {
  const id = idInBody(request.body)
  const r = id === undefined ? undefined : rows.get(id)
  if (r === undefined) return
  at(r, "up")
  request.firstByte = r
})
dc.subscribe("http.client.request.start", ({ request }) => at(rows.get(request.getHeader("x-first-byte-id")), "up"))
dc.subscribe("undici:client:sendHeaders", ({ request }) => at(request.firstByte, "sent"))
dc.subscribe("undici:request:headers", ({ request }) => at(request.firstByte, "upHead"))

const http = require("node:http")
for (const method of ["write", "end"]) {
  const original = http.ServerResponse.prototype[method]
  http.ServerResponse.prototype[method] = function (...args) {
    const id = this.req === undefined ? undefined : header(this.req.headers["x-first-byte-id"])
    if (id !== undefined) at(rows.get(id), "out")
    return original.apply(this, args)
  }
}

process.on("SIGUSR2", () => {
  const out = process.env.FIRST_BYTE_PROBE_OUT
  // Whole or not at all: the reader waits for the file to appear.
  if (out) {
    fs.writeFileSync(`${out}.partial`, JSON.stringify([...rows.values()]))
    fs.renameSync(`${out}.partial`, out)
  }
  rows.clear()
})
