// A preload (`node --require bench/loop-bins.cjs ...`) that counts, in bins of 5 ms, what a node
// process's event loop did: its socket writes (to the sockets its HTTP server accepted, and to the
// others: its upstream requests), the requests its server parsed, the connections it accepted, the
// connections it opened, the answer heads it wrote, the turns of its loop that did any of these
// (one `setImmediate` armed by the first of them in a turn: an idle loop is not kept awake) and the
// longest wait of a 1 ms timer (a turn that long). SIGUSR2 starts a recording; the next one writes
// it to $LOOP_BINS (one line a bin that saw anything: ms from the start, then the counts in the
// order of COLUMNS) and $LOOP_BINS.start (the start as epoch ms, `performance.timeOrigin +
// performance.now()`, comparable across processes). While recording it costs a counter an event
// and a timer every millisecond; nothing otherwise. Used by stream-gaps.mjs.
const fs = require("node:fs")
const http = require("node:http")
const net = require("node:net")

const BIN_MS = 5
const BINS = 4000
const COLUMNS = ["serverWrites", "otherWrites", "requests", "accepts", "connects", "heads", "turns", "longestTimerWaitMs"]
const counts = COLUMNS.map(() => new Float64Array(BINS))
const [serverWrites, otherWrites, requests, accepts, connects, heads, turns, longest] = counts
let recording = false
let t0 = 0
let lastTimer = 0

const bin = () => {
  const b = Math.floor((performance.now() - t0) / BIN_MS)
  return b >= 0 && b < BINS ? b : -1
}
/** A turn counted once, at its check phase, when something in it was counted. */
let turnArmed = false
const turn = () => {
  turnArmed = false
  if (!recording) return
  const b = bin()
  if (b >= 0) turns[b]++
}
const count = (column) => {
  if (!recording) return
  const b = bin()
  if (b >= 0) column[b]++
  if (!turnArmed) {
    turnArmed = true
    setImmediate(turn)
  }
}

for (const name of ["_write", "_writev"]) {
  const original = net.Socket.prototype[name]
  net.Socket.prototype[name] = function (...args) {
    count(this.server ? serverWrites : otherWrites)
    return original.apply(this, args)
  }
}
const connect = net.Socket.prototype.connect
net.Socket.prototype.connect = function (...args) {
  count(connects)
  return connect.apply(this, args)
}
const storeHeader = http.ServerResponse.prototype._storeHeader
http.ServerResponse.prototype._storeHeader = function (...args) {
  count(heads)
  return storeHeader.apply(this, args)
}
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (event, ...args) {
  if (event === "request") count(requests)
  else if (event === "connection") count(accepts)
  return emit.call(this, event, ...args)
}

const timer = () => {
  if (!recording) return
  const now = performance.now()
  const b = bin()
  if (b >= 0) longest[b] = Math.max(longest[b], now - lastTimer - 1)
  lastTimer = now
  setTimeout(timer, 1)
}

const file = process.env.LOOP_BINS
process.on("SIGUSR2", () => {
  if (!file) return
  if (!recording) {
    for (const c of counts) c.fill(0)
    t0 = performance.now()
    lastTimer = t0
    recording = true
    setTimeout(timer, 1)
    fs.writeFileSync(`${file}.start`, String(performance.timeOrigin + t0))
    return
  }
  recording = false
  const lines = []
  for (let b = 0; b < BINS; b++) {
    const row = counts.map((c) => c[b])
    if (row.some((v, i) => (i === row.length - 1 ? v > 2 : v > 0)))
      lines.push([b * BIN_MS, ...row.map((v) => Math.round(v * 10) / 10)].join(" "))
  }
  // Whole or not at all for a reader that waits for the file: written aside, then renamed.
  fs.writeFileSync(`${file}.part`, `ms ${COLUMNS.join(" ")}\n${lines.join("\n")}\n`)
  fs.renameSync(`${file}.part`, file)
})
