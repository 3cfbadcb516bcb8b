import { spawn, spawnSync, type ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, afterEach, describe, expect, it, vi } from "vitest"
import { makeProcessAttribution, parseTcpTable } from "../src/services/inspector/capture/process.js"
import {
  BLOCK,
  guardDeadline,
  makeSystemProxy,
  type Run,
  type SavedState,
  SystemProxyError,
  type SystemProxyStore
} from "../src/services/inspector/capture/systemProxy.js"

/**
 * The inspector's two capture helpers that touch the system: process attribution (read-only, /proc)
 * and the system-wide proxy mode (edits a home and the desktop settings). The proxy mode only ever
 * runs against temporary homes and an in-memory gsettings here: the machine's own settings are never touched.
 */

// Not the shared helper in support/gateway.ts: this file needs no gateway, so it does not load one.
const made: string[] = []
const tempDir = (prefix: string): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  made.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
})
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe.runIf(process.platform === "linux")("process attribution", () => {
  const children: ChildProcess[] = []
  const servers: net.Server[] = []
  afterEach(() => {
    for (const c of children.splice(0)) c.kill("SIGKILL")
    for (const s of servers.splice(0)) s.close()
  })

  const listen = async (): Promise<net.Server> => {
    const server = net.createServer()
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    return server
  }

  it("finds the pid and name of a local client from its ephemeral port", async () => {
    const server = await listen()
    const port = (server.address() as net.AddressInfo).port
    const accepted = new Promise<net.Socket>((resolve) => server.once("connection", resolve))
    const child = spawn(process.execPath, ["-e", `require("net").connect(${port}, "127.0.0.1"); setInterval(() => {}, 1e6)`], {
      stdio: "ignore"
    })
    children.push(child)
    const socket = await accepted
    socket.on("error", () => undefined)
    // comm: the executable's name ("node"), at most 15 characters.
    const name = path.basename(process.execPath).slice(0, 15)
    expect(await makeProcessAttribution().lookup(socket.remotePort!)).toEqual({ pid: child.pid, name })
    // The server port only breaks ties; giving it changes nothing here.
    expect(await makeProcessAttribution().lookup(socket.remotePort!, port)).toEqual({ pid: child.pid, name })
  })

  it("answers null for a port nobody uses, a missing or unreadable procfs, and other systems", async () => {
    const server = await listen()
    const free = (server.address() as net.AddressInfo).port
    await new Promise((resolve) => server.close(resolve))
    // A closed listener's port: no row, or a listening/TIME_WAIT row that is never the client's.
    expect(await makeProcessAttribution().lookup(free)).toBeNull()
    expect(await makeProcessAttribution().lookup(0)).toBeNull()
    expect(await makeProcessAttribution({ procRoot: path.join(tempDir("gw-proc-"), "missing") }).lookup(40000)).toBeNull()
    const notADir = path.join(tempDir("gw-proc-"), "file")
    fs.writeFileSync(notADir, "not procfs")
    expect(await makeProcessAttribution({ procRoot: notADir }).lookup(40000)).toBeNull()
    expect(await makeProcessAttribution({ platform: "darwin", procRoot: fakeProc().root }).lookup(40000)).toBeNull()
  })

  /** A crafted procfs: tcp and tcp6 tables, pids with fd links, comm files. */
  const fakeProc = () => {
    const root = tempDir("gw-proc-")
    fs.mkdirSync(path.join(root, "net"))
    const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    const row4 = (sl: number, local: string, remote: string, st: string, inode: number) =>
      `   ${sl}: ${local} ${remote} ${st} 00000000:00000000 00:00000000 00000000  1000        0 ${inode} 1 0000000000000000 20 4 30 10 -1\n`
    const tcp = (rows: string) => fs.writeFileSync(path.join(root, "net", "tcp"), header + rows)
    const tcp6 = (rows: string) => fs.writeFileSync(path.join(root, "net", "tcp6"), header + rows)
    const proc = (pid: number, comm: string, links: Record<string, string>) => {
      fs.mkdirSync(path.join(root, String(pid), "fd"), { recursive: true })
      fs.writeFileSync(path.join(root, String(pid), "comm"), `${comm}\n`)
      for (const [fd, target] of Object.entries(links)) fs.symlinkSync(target, path.join(root, String(pid), "fd", fd))
    }
    return { root, tcp, tcp6, row4, proc }
  }

  it("parses crafted tables: the connected row wins over listening and TIME_WAIT rows, tcp6 rows included", async () => {
    const p = fakeProc()
    // 0x9C40 = 40000, 0x1F90 = 8080, 0x9C41 = 40001.
    p.tcp(
      p.row4(0, "0100007F:9C40", "00000000:0000", "0A", 111) + // a listener on the same port: never the client
        p.row4(1, "0100007F:9C40", "0100007F:1F90", "06", 0) + // TIME_WAIT: no owner
        p.row4(2, "0100007F:9C40", "0100007F:1F90", "01", 222) +
        p.row4(3, "0100007F:1F90", "0100007F:9C40", "01", 333) // the server's side: its local port is the listener's
    )
    p.tcp6(p.row4(0, "00000000000000000000000001000000:9C41", "00000000000000000000000001000000:1F90", "01", 444))
    p.proc(10, "listener", { "3": "socket:[111]", "4": "socket:[333]" })
    p.proc(20, "curl", { "0": "/dev/null", "5": "socket:[222]" })
    p.proc(30, "python3", { "7": "socket:[444]", "8": "pipe:[9]" })
    fs.mkdirSync(path.join(p.root, "self"))
    fs.mkdirSync(path.join(p.root, "40")) // exited meanwhile: no fd dir, no comm
    const attribution = makeProcessAttribution({ procRoot: p.root })
    expect(await attribution.lookup(40000)).toEqual({ pid: 20, name: "curl" })
    expect(await attribution.lookup(40001)).toEqual({ pid: 30, name: "python3" })
    expect(await attribution.lookup(40002)).toBeNull()
    expect(parseTcpTable("garbage\n  0: zz\n")).toEqual([])
  })

  it("reuses its answers for the ttl, then reads again", async () => {
    const p = fakeProc()
    p.tcp(p.row4(0, "0100007F:9C40", "0100007F:1F90", "01", 222))
    p.proc(20, "first", { "5": "socket:[222]" })
    p.proc(21, "second", {})
    // The clock is the test's: a loaded machine's file reads could outlast a real 300 ms.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() })
    try {
      const attribution = makeProcessAttribution({ procRoot: p.root, ttlMs: 300 })
      expect(await attribution.lookup(40000)).toEqual({ pid: 20, name: "first" })
      // The socket moves to another process and the table changes: within the ttl, still the old answer.
      fs.unlinkSync(path.join(p.root, "20", "fd", "5"))
      fs.symlinkSync("socket:[555]", path.join(p.root, "21", "fd", "5"))
      p.tcp(p.row4(0, "0100007F:9C40", "0100007F:1F90", "01", 555))
      vi.setSystemTime(Date.now() + 200)
      expect(await attribution.lookup(40000)).toEqual({ pid: 20, name: "first" })
      vi.setSystemTime(Date.now() + 200)
      expect(await attribution.lookup(40000)).toEqual({ pid: 21, name: "second" })
    } finally {
      vi.useRealTimers()
    }
  })
})

/** An in-memory gsettings, with the call log and ways to fail. */
const fakeGsettings = (opts: { failOnSet?: number; failOnCall?: number; hangOnSet?: number } = {}) => {
  const values = new Map<string, string>([
    ["org.gnome.system.proxy mode", "'none'"],
    ["org.gnome.system.proxy.http host", "''"],
    ["org.gnome.system.proxy.http port", "0"],
    ["org.gnome.system.proxy.https host", "''"],
    ["org.gnome.system.proxy.https port", "0"],
    ["org.gnome.system.proxy ignore-hosts", "['localhost', '127.0.0.0/8', '::1', 'corp.example']"]
  ])
  const initial = new Map(values)
  let calls = 0
  let sets = 0
  const run: Run = async (cmd, args) => {
    expect(cmd).toBe("gsettings")
    calls++
    const [verb, schema, key, value] = args
    if (calls === opts.failOnCall) return { code: 1, stdout: "", stderr: "injected failure" }
    if (verb === "get") return { code: 0, stdout: `${values.get(`${schema} ${key}`)}\n`, stderr: "" }
    if (verb === "set") {
      sets++
      if (sets === opts.failOnSet) return { code: 1, stdout: "", stderr: "injected failure" }
      if (sets === opts.hangOnSet) return new Promise(() => undefined)
      values.set(`${schema} ${key}`, value!)
      return { code: 0, stdout: "", stderr: "" }
    }
    return { code: 1, stdout: "", stderr: "unknown command" }
  }
  return { values, initial, run, sets: () => sets }
}

const noGsettings: Run = async () => Promise.reject(Object.assign(new Error("spawn gsettings ENOENT"), { code: "ENOENT" }))

/** Every file and directory under `dir`, with file contents: the whole home, to compare byte for byte. */
const snapshot = (dir: string): Record<string, string> => {
  const out: Record<string, string> = {}
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) (out[`${path.relative(dir, p)}/`] = ""), walk(p)
      else out[path.relative(dir, p)] = fs.readFileSync(p, "utf8")
    }
  }
  walk(dir)
  return out
}

/** A store like the database's, which also records what the home looked like when each state was saved. */
const memoryStore = (home?: string, gsettings?: Map<string, string>) => {
  let state: SavedState | undefined
  const saves: Array<{ state: SavedState; home: Record<string, string> | null; gsettings: Map<string, string> | null }> = []
  const store: SystemProxyStore = {
    load: async () => (state === undefined ? undefined : structuredClone(state)),
    save: async (s) => {
      saves.push({
        state: structuredClone(s),
        home: home === undefined ? null : snapshot(home),
        gsettings: gsettings === undefined ? null : new Map(gsettings)
      })
      state = structuredClone(s)
    },
    clear: async () => {
      state = undefined
    }
  }
  return { store, saves, current: () => state }
}

const USER_PROFILE = '# ~/.profile of a user\nexport EDITOR=vim\nPATH="$HOME/bin:$PATH"\n'

const makeHome = () => {
  const home = tempDir("gw-home-")
  fs.writeFileSync(path.join(home, ".profile"), USER_PROFILE)
  return home
}

const PROXY = { host: "127.0.0.1", port: 18080 }
const URL = "http://127.0.0.1:18080"

describe("system-wide proxy mode", () => {
  it("records the previous state before the first change, applies, and reverts byte for byte", async () => {
    const home = makeHome()
    const before = snapshot(home)
    const gs = fakeGsettings()
    const mem = memoryStore(home, gs.values)
    const sp = makeSystemProxy({ home, store: mem.store, run: gs.run })

    const applied = await sp.apply(PROXY)
    expect(applied.proxyUrl).toBe(URL)
    expect(applied.notes).toEqual([])
    // The first save happened before anything changed, and holds what to restore.
    const first = mem.saves[0]!
    expect(first.home).toEqual(before)
    expect(first.gsettings).toEqual(gs.initial)
    expect(first.state.phase).toBe("applying")
    expect(first.state.gsettings.find((g) => g.key === "mode")!.previous).toBe("'none'")
    expect(first.state.files.find((f) => f.path.endsWith(".profile"))).toMatchObject({ kind: "rc", existed: true, previous: USER_PROFILE })
    expect(first.state.files.find((f) => f.path.endsWith(".bashrc"))).toMatchObject({ kind: "rc", existed: false })
    expect(mem.current()!.phase).toBe("applied")

    // What changed, as the API reports it.
    const targets = applied.changes.map((c) => `${c.kind} ${c.target.replace(home, "~")}`)
    expect(targets).toEqual([
      "file ~/.config",
      "file ~/.config/gateway",
      "file ~/.config/environment.d",
      "file ~/.config/gateway/proxy.env",
      "file ~/.config/environment.d/gateway-proxy.conf",
      "file ~/.profile",
      "file ~/.bashrc",
      "gsettings org.gnome.system.proxy mode",
      "gsettings org.gnome.system.proxy.http host",
      "gsettings org.gnome.system.proxy.http port",
      "gsettings org.gnome.system.proxy.https host",
      "gsettings org.gnome.system.proxy.https port",
      "gsettings org.gnome.system.proxy ignore-hosts"
    ])

    const read = (p: string) => fs.readFileSync(path.join(home, p), "utf8")
    expect(read(".profile")).toBe(USER_PROFILE + BLOCK)
    expect(read(".bashrc")).toBe(BLOCK)
    const env = read(".config/gateway/proxy.env")
    for (const name of ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"]) expect(env).toContain(`export ${name}="${URL}"\n`)
    expect(env).toContain('export no_proxy="localhost,127.0.0.1,::1"\n')
    expect(env).toContain('export NO_PROXY="localhost,127.0.0.1,::1"\n')
    const envd = read(".config/environment.d/gateway-proxy.conf")
    expect(envd).toContain(`\nhttps_proxy=${URL}\n`)
    expect(envd).toContain("\nno_proxy=localhost,127.0.0.1,::1\n")
    expect(envd).not.toContain("export")
    expect(Object.fromEntries(gs.values)).toEqual({
      "org.gnome.system.proxy mode": "'manual'",
      "org.gnome.system.proxy.http host": "'127.0.0.1'",
      "org.gnome.system.proxy.http port": "18080",
      "org.gnome.system.proxy.https host": "'127.0.0.1'",
      "org.gnome.system.proxy.https port": "18080",
      "org.gnome.system.proxy ignore-hosts": "['localhost', '127.0.0.0/8', '::1']"
    })
    expect(await sp.status()).toMatchObject({ applied: true, phase: "applied", proxy: PROXY, appliedAt: applied.appliedAt })

    // Applying again is refused, not stacked.
    await expect(sp.apply(PROXY)).rejects.toMatchObject({ code: "already-applied" })

    const reverted = await sp.revert()
    expect(reverted.reverted).toBe(true)
    expect(reverted.failures).toEqual([])
    expect(snapshot(home)).toEqual(before)
    expect(gs.values).toEqual(gs.initial)
    expect(mem.current()).toBeUndefined()
    expect(await sp.status()).toMatchObject({ applied: false, phase: null })
    expect(await sp.revert()).toEqual({ reverted: false, changes: [], failures: [] })
  })

  it("without gsettings changes only the files", async () => {
    const home = makeHome()
    const before = snapshot(home)
    const mem = memoryStore()
    const sp = makeSystemProxy({ home, store: mem.store, run: noGsettings })
    const applied = await sp.apply({ host: "::1", port: 18081 })
    expect(applied.changes.every((c) => c.kind === "file")).toBe(true)
    expect(applied.notes[0]).toMatch(/gsettings not found/)
    expect(mem.current()!.gsettings).toEqual([])
    expect(fs.readFileSync(path.join(home, ".config/gateway/proxy.env"), "utf8")).toContain('export https_proxy="http://[::1]:18081"')
    expect((await sp.revert()).failures).toEqual([])
    expect(snapshot(home)).toEqual(before)
  })

  it("refuses a proxy that is not on this machine", async () => {
    const home = makeHome()
    const mem = memoryStore()
    const sp = makeSystemProxy({ home, store: mem.store, run: noGsettings })
    await expect(sp.apply({ host: "10.0.0.1", port: 8080 })).rejects.toBeInstanceOf(SystemProxyError)
    await expect(sp.apply({ host: "127.0.0.1; rm -rf /", port: 8080 })).rejects.toMatchObject({ code: "invalid-proxy" })
    await expect(sp.apply({ host: "127.0.0.1", port: 70000 })).rejects.toMatchObject({ code: "invalid-proxy" })
    expect(mem.saves).toEqual([])
  })

  it("recovers after a crash: a new instance on the same store reverts everything", async () => {
    const home = makeHome()
    const before = snapshot(home)
    const gs = fakeGsettings()
    const mem = memoryStore()
    await makeSystemProxy({ home, store: mem.store, run: gs.run }).apply(PROXY)
    const restarted = makeSystemProxy({ home, store: mem.store, run: gs.run })
    expect(await restarted.recover()).toBe(true)
    expect(snapshot(home)).toEqual(before)
    expect(gs.values).toEqual(gs.initial)
    expect(mem.current()).toBeUndefined()
    expect(await restarted.recover()).toBe(false)
  })

  it("recovers from a crash in the middle of apply", async () => {
    const home = makeHome()
    const before = snapshot(home)
    // The second desktop setting never returns: the process "dies" with the files and one key changed.
    const gs = fakeGsettings({ hangOnSet: 2 })
    const mem = memoryStore()
    void makeSystemProxy({ home, store: mem.store, run: gs.run }).apply(PROXY)
    for (let i = 0; i < 200 && gs.sets() < 2; i++) await sleep(5)
    expect(gs.values.get("org.gnome.system.proxy mode")).toBe("'manual'")
    expect(mem.current()!.phase).toBe("applying")
    const restarted = makeSystemProxy({ home, store: mem.store, run: fakeGsettingsOver(gs.values) })
    expect(await restarted.recover()).toBe(true)
    expect(snapshot(home)).toEqual(before)
    expect(gs.values).toEqual(gs.initial)
  })

  it("a failure midway undoes what was done and rejects", async () => {
    const home = makeHome()
    const before = snapshot(home)
    const gs = fakeGsettings({ failOnSet: 3 })
    const mem = memoryStore()
    const sp = makeSystemProxy({ home, store: mem.store, run: gs.run })
    await expect(sp.apply(PROXY)).rejects.toMatchObject({ code: "apply-failed", message: expect.stringContaining("injected failure") })
    expect(snapshot(home)).toEqual(before)
    expect(gs.values).toEqual(gs.initial)
    expect(mem.current()).toBeUndefined()
    expect(await sp.status()).toMatchObject({ applied: false })

    // Failing while reading the previous values (the third call is a `get`): nothing recorded, nothing changed.
    const early = fakeGsettings({ failOnCall: 3 })
    const mem2 = memoryStore()
    await expect(makeSystemProxy({ home, store: mem2.store, run: early.run }).apply(PROXY)).rejects.toThrow(/injected failure/)
    expect(mem2.saves).toEqual([])
    expect(snapshot(home)).toEqual(before)
    expect(early.values).toEqual(early.initial)
  })

  it("a revert goes on past a failing step, reports it, and keeps only it recorded for a retry", async () => {
    const home = makeHome()
    const before = snapshot(home)
    const gs = fakeGsettings()
    const mem = memoryStore()
    await makeSystemProxy({ home, store: mem.store, run: gs.run }).apply(PROXY)
    const working = fakeGsettingsOver(gs.values)
    const flaky: Run = async (cmd, args) => (args[2] === "mode" ? { code: 1, stdout: "", stderr: "no session bus" } : working(cmd, args))
    const partial = await makeSystemProxy({ home, store: mem.store, run: flaky }).revert()
    expect(partial.reverted).toBe(true)
    expect(partial.failures).toEqual([{ target: "org.gnome.system.proxy mode", error: expect.stringContaining("no session bus") }])
    expect(snapshot(home)).toEqual(before)
    expect(mem.current()).toMatchObject({
      phase: "reverting",
      files: [],
      createdDirs: [],
      gsettings: [{ key: "mode", previous: "'none'" }]
    })
    const retried = await makeSystemProxy({ home, store: mem.store, run: working }).revert()
    expect(retried.failures).toEqual([])
    expect(gs.values).toEqual(gs.initial)
    expect(mem.current()).toBeUndefined()
  })

  it("keeps the user's own edits to .profile made while applied", async () => {
    const home = makeHome()
    const mem = memoryStore()
    const sp = makeSystemProxy({ home, store: mem.store, run: noGsettings })
    await sp.apply(PROXY)
    const profile = path.join(home, ".profile")
    fs.writeFileSync(profile, `# added on top\n${fs.readFileSync(profile, "utf8")}export LATER=1\n`)
    await sp.revert()
    expect(fs.readFileSync(profile, "utf8")).toBe(`# added on top\n${USER_PROFILE}export LATER=1\n`)
    expect(fs.existsSync(path.join(home, ".bashrc"))).toBe(false)
  })

  it("puts the block on a line of its own when .profile lacks a final newline, and takes it away again", async () => {
    const home = tempDir("gw-home-")
    fs.writeFileSync(path.join(home, ".profile"), "export A=1")
    fs.writeFileSync(path.join(home, ".bashrc"), "alias ll='ls -l'\n")
    const before = snapshot(home)
    const sp = makeSystemProxy({ home, store: memoryStore().store, run: noGsettings })
    await sp.apply(PROXY)
    expect(fs.readFileSync(path.join(home, ".profile"), "utf8")).toBe(`export A=1\n${BLOCK}`)
    await sp.revert()
    expect(snapshot(home)).toEqual(before)
  })

  it.runIf(spawnSync("bash", ["--version"]).status === 0)("a login shell picks the proxy up, and drops it after revert", async () => {
    const home = makeHome()
    const sp = makeSystemProxy({ home, store: memoryStore().store, run: noGsettings })
    const shell = () => {
      const env: Record<string, string> = { HOME: home, PATH: process.env["PATH"] ?? "/usr/bin:/bin" }
      return spawnSync("bash", ["-lc", "echo $https_proxy"], { env, encoding: "utf8" }).stdout
    }
    expect(shell()).toBe("\n")
    await sp.apply(PROXY)
    expect(shell()).toBe(`${URL}\n`)
    await sp.revert()
    expect(shell()).toBe("\n")
  })

  it("guardDeadline is the apply time plus the guard minutes", () => {
    expect(guardDeadline(1_000, 30)).toBe(1_000 + 30 * 60_000)
  })
})

/** A gsettings over an existing map (the restarted process sees the same desktop settings). */
const fakeGsettingsOver = (values: Map<string, string>): Run => {
  return async (_cmd, args) => {
    const [verb, schema, key, value] = args
    if (verb === "get") return { code: 0, stdout: `${values.get(`${schema} ${key}`)}\n`, stderr: "" }
    values.set(`${schema} ${key}`, value!)
    return { code: 0, stdout: "", stderr: "" }
  }
}
