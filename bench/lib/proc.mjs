// Child processes of the benchmark: spawn (pinned to a core when taskset is available, with the
// file-descriptor limit raised to the hard limit), read RSS, stop, and a registry that kills
// every child and removes every temporary directory on exit, on errors and on Ctrl-C.
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { readdirSync, readFileSync, rmSync } from "node:fs"
import * as net from "node:net"
import * as os from "node:os"

const children = new Set()
const tempDirs = new Set()

/** Whether `taskset` works here and there are at least two cores to split the work over. */
export const tasksetAvailable = () => {
  if (os.cpus().length < 2) return false
  try {
    return spawnSync("taskset", ["-c", "0", "true"], { stdio: "ignore" }).status === 0
  } catch {
    return false
  }
}

let tasksetWorks
/** Whether `taskset` runs here (checked once). */
const tasksetRuns = () => {
  if (tasksetWorks === undefined) {
    try {
      tasksetWorks = spawnSync("taskset", ["-c", "0", "true"], { stdio: "ignore" }).status === 0
    } catch {
      tasksetWorks = false
    }
  }
  return tasksetWorks
}

/** Pins this process (all its threads) to one core. Returns true when it worked. */
export const pinSelf = (core) => {
  try {
    execFileSync("taskset", ["-a", "-cp", String(core), String(process.pid)], { stdio: "ignore" })
    return true
  } catch {
    return false
  }
}

/** The soft limit on open files of a process, from /proc (null when unknown). */
export const openFilesLimit = (pid = "self") => {
  try {
    const line = readFileSync(`/proc/${pid}/limits`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"))
    const v = line?.split(/\s{2,}/)[1]
    return v === "unlimited" ? Infinity : Number(v)
  } catch {
    return null
  }
}

/** VmRSS of a process in bytes, from /proc/<pid>/status (null when the process is gone). */
export const rssBytes = (pid) => {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return m ? Number(m[1]) * 1024 : null
  } catch {
    return null
  }
}

/** A free TCP port on 127.0.0.1 (listen on 0, read it back, close). */
export const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.unref()
    srv.on("error", reject)
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address()
      srv.close(() => resolve(port))
    })
  })

/**
 * Spawns `cmd args` as its own process. Through `sh -c 'ulimit -n <hard>; exec ...'` and
 * `taskset -c <core>` (both exec, so the pid is the program's own). Output is kept (last 64 KB)
 * for error messages; `onLine` sees each line of stdout and stderr.
 */
export const spawnChild = ({ name, cmd, args, env, cwd, core, pin, onLine }) => {
  // Unpinned means every core, said explicitly: a child inherits the harness's own pin (pinSelf) otherwise.
  const affinity =
    pin && core != null ? ["taskset", "-c", String(core)] : tasksetRuns() ? ["taskset", "-c", `0-${Math.max(0, os.cpus().length - 1)}`] : []
  const argv = [...affinity, cmd, ...args]
  const t0 = performance.now()
  const child = spawn("/bin/sh", ["-c", 'ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"', "sh", ...argv], {
    cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"]
  })
  let out = ""
  let stdout = ""
  let partial = ""
  child.stdout.on("data", (c) => {
    if (stdout.length < 1 << 20) stdout += c.toString()
  })
  const onData = (c) => {
    const s = c.toString()
    out = (out + s).slice(-65536)
    if (onLine) {
      const lines = (partial + s).split("\n")
      partial = lines.pop()
      for (const l of lines) onLine(l)
    }
  }
  child.stdout.on("data", onData)
  child.stderr.on("data", onData)
  let exitInfo = null
  const exited = new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      exitInfo = { code, signal }
      children.delete(handle)
      resolve(exitInfo)
    })
  )
  child.on("error", () => {})
  const handle = {
    name,
    child,
    pid: child.pid,
    spawnedAt: t0,
    argv,
    output: () => out,
    stdout: () => stdout,
    exited,
    exitInfo: () => exitInfo,
    alive: () => exitInfo === null,
    /** SIGTERM (or `signal`), then SIGKILL after `graceMs`. Resolves with the exit info. */
    stop: async (signal = "SIGTERM", graceMs = 15_000) => {
      if (exitInfo) return exitInfo
      try {
        child.kill(signal)
      } catch {}
      const timer = setTimeout(() => {
        try {
          child.kill("SIGKILL")
        } catch {}
      }, graceMs)
      const info = await exited
      clearTimeout(timer)
      return info
    }
  }
  children.add(handle)
  return handle
}

/** Resolves with the first line matching `re` (its match), or rejects on exit or timeout. */
export const waitForLine = (handle, re, timeoutMs = 15_000) =>
  new Promise((resolve, reject) => {
    let done = false
    const check = () => {
      const m = re.exec(handle.output())
      if (m && !done) {
        done = true
        clearInterval(poll)
        clearTimeout(timer)
        resolve(m)
      }
    }
    const poll = setInterval(check, 2)
    const timer = setTimeout(() => {
      if (done) return
      done = true
      clearInterval(poll)
      reject(new Error(`${handle.name} printed no line matching ${re} within ${timeoutMs} ms:\n${handle.output().slice(-2000)}`))
    }, timeoutMs)
    handle.exited.then((info) => {
      check()
      if (done) return
      done = true
      clearInterval(poll)
      clearTimeout(timer)
      reject(new Error(`${handle.name} exited (${info.code ?? info.signal}) before it was ready:\n${handle.output().slice(-2000)}`))
    })
  })

export const registerTempDir = (dir) => tempDirs.add(dir)

/** Stops every child still running (SIGTERM, SIGKILL after `graceMs`) and removes temp dirs. */
export const cleanup = async (graceMs = 5_000) => {
  await Promise.all([...children].map((c) => c.stop("SIGTERM", graceMs)))
  for (const d of tempDirs) {
    try {
      rmSync(d, { recursive: true, force: true })
    } catch {}
    tempDirs.delete(d)
  }
}

/** Last resort on a synchronous exit: SIGKILL whatever is left, remove temp dirs. */
export const cleanupSync = () => {
  for (const c of children) {
    try {
      c.child.kill("SIGKILL")
    } catch {}
  }
  for (const d of tempDirs) {
    try {
      rmSync(d, { recursive: true, force: true })
    } catch {}
  }
}

/**
 * For a script that starts targets: they are stopped however it ends (an uncaught error, an
 * unhandled rejection, Ctrl-C, SIGTERM), the error printed, the exit code 1, 130 or 143.
 */
export const stopChildrenOnExit = () => {
  const stop = (code) => (e) => {
    if (e instanceof Error) console.error(e)
    cleanupSync()
    process.exit(code)
  }
  process.on("uncaughtException", stop(1))
  process.on("unhandledRejection", stop(1))
  process.on("SIGINT", stop(130))
  process.on("SIGTERM", stop(143))
}

export const liveChildren = () => [...children]

const CLK_TCK = (() => {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100
  } catch {
    return 100
  }
})()

/**
 * A process's CPU seconds so far from /proc/<pid>/stat: its own (user + system, all threads), and
 * with `reaped` also its children that have exited and been waited for (`cutime` and `cstime`: a
 * child's time moves there when its parent reaps it, a reaped child's own reaped children with it);
 * null when it is gone.
 */
const statCpuSeconds = (pid, reaped) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const own = Number(f[11]) + Number(f[12])
    return (reaped ? own + Number(f[13]) + Number(f[14]) : own) / CLK_TCK
  } catch {
    return null
  }
}

/** CPU seconds (user + system, all threads) a process has used so far; null when it is gone. */
export const cpuSeconds = (pid) => statCpuSeconds(pid, false)

/** The pids of a process's live children (every thread's), from /proc (empty when unknown). */
const childPids = (pid) => {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
      try {
        return readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").split(" ").filter(Boolean).map(Number)
      } catch {
        return []
      }
    })
  } catch {
    return []
  }
}

/**
 * CPU seconds used so far by a process and every descendant it ever had, live or exited: each
 * live process's time with its reaped children's (a `--workers` primary and its workers). Two
 * readings can be compared across an interval in which descendants started or exited (a `--workers` gateway's
 * workers, a CLI run, a gateway started and stopped); only a descendant whose parent exits without
 * waiting for it (it is adopted by another process) drops out, with all its past CPU.
 */
export const familyCpuSeconds = (pid, seen = new Set()) => {
  const own = statCpuSeconds(pid, true)
  if (own == null) return null
  seen.add(pid)
  return childPids(pid).reduce((sum, child) => sum + (familyCpuSeconds(child, seen) ?? 0), own)
}

/** A process and its live descendants, from /proc: a `--workers` primary first, then its workers. */
export const processTree = (pid) => [pid, ...childPids(pid).flatMap(processTree)]

/**
 * Established TCP connections to a local port, counted by the pid that holds each (from `ss -tnp`;
 * null where it fails): how a `--workers` primary spread the load generator's connections over
 * its workers. Node's cluster hands each new connection to the first worker that acknowledged the
 * last one, so a burst of connections can go mostly to the worker that had a core at that moment.
 */
export const connectionsByPid = (port) => {
  try {
    const out = execFileSync("ss", ["-tnpH", "state", "established", `sport = :${port}`], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"]
    })
    const byPid = {}
    for (const m of out.matchAll(/pid=(\d+)/g)) byPid[m[1]] = (byPid[m[1]] ?? 0) + 1
    return byPid
  } catch {
    return null
  }
}

/** Machine-wide busy and total CPU seconds since boot, from /proc/stat. */
const machineCpu = () => {
  try {
    const f = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/).slice(1).map(Number)
    const [user, nice, system, idle, iowait, irq, softirq, steal] = f
    const busy = user + nice + system + irq + softirq + (steal ?? 0)
    return { busy: busy / CLK_TCK, total: (busy + idle + iowait) / CLK_TCK }
  } catch {
    return null
  }
}

/**
 * A snapshot of CPU use: the machine's; ours, this process's and every descendant's it ever had
 * (`familyCpuSeconds`); and each child's own, by pid (`per`: a target's CPU over a run).
 * `foreignSince(prev)` is the share of the machine's CPU capacity used by other processes
 * between two snapshots (0..1): a high value means the numbers of that interval are noisy.
 * Ours is the whole family: a gateway started after `prev` (the workers section's, their `gateway
 * setup` runs) and a `--workers` gateway's workers (the bench's grandchildren) are not other processes.
 */
export const cpuSnapshot = () => {
  const m = machineCpu()
  const per = new Map([[process.pid, cpuSeconds(process.pid)]])
  for (const c of children) per.set(c.pid, cpuSeconds(c.pid))
  const seen = new Set()
  let ours = familyCpuSeconds(process.pid, seen)
  // Where the kernel lists no children (/proc/<pid>/task/<tid>/children needs CONFIG_PROC_CHILDREN),
  // the walk stops at this process: the children this module started are still ours.
  if (ours != null) for (const c of children) if (!seen.has(c.pid)) ours += familyCpuSeconds(c.pid, seen) ?? 0
  return { at: performance.now(), machine: m, ours, per }
}
export const foreignSince = (prev, now = cpuSnapshot()) => {
  if (!prev?.machine || !now.machine || prev.ours == null || now.ours == null) return null
  const total = now.machine.total - prev.machine.total
  if (total <= 0) return null
  return Math.max(0, Math.min(1, (now.machine.busy - prev.machine.busy - (now.ours - prev.ours)) / total))
}
