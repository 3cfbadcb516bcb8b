/**
 * Real servers for the scale-out suite (`npm run test:scale`), from Debian's packages: a private
 * PostgreSQL cluster (initdb into a temporary directory, run as the `postgres` user when this
 * process is root, since PostgreSQL refuses to run as root), a Redis server and nginx, each on a
 * free loopback port, each stopped at the end. A missing binary is a failure naming the package
 * to install (`.ci/run` installs them), never a skip.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"

const exists = (file: string) => {
  try {
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first of `candidates` that exists, or a failure naming the Debian package. */
const binary = (what: string, pkg: string, candidates: ReadonlyArray<string>): string => {
  const found = candidates.find(exists)
  if (!found)
    throw new Error(
      `the scale-out suite needs ${what}: install Debian's ${pkg} package (apt-get install ${pkg}); looked for ${candidates.join(", ")}`
    )
  return found
}

const pgBin = (name: string): string => {
  const versions = fs.existsSync("/usr/lib/postgresql") ? fs.readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a)) : []
  return binary(
    `PostgreSQL's ${name}`,
    "postgresql",
    versions.map((v) => `/usr/lib/postgresql/${v}/bin/${name}`)
  )
}

export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const s = net.createServer()
    s.once("error", reject)
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port
      s.close(() => resolve(port))
    })
  })

const waitForPort = async (port: number, what: string, child?: ChildProcess, log?: () => string, timeoutMs = 30_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (child && child.exitCode !== null) throw new Error(`${what} exited with ${child.exitCode}: ${log?.() ?? ""}`)
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1")
      s.once("connect", () => {
        s.destroy()
        resolve(true)
      })
      s.once("error", () => resolve(false))
    })
    if (ok) return
    if (Date.now() > deadline) throw new Error(`${what} did not listen on 127.0.0.1:${port} within ${timeoutMs} ms: ${log?.() ?? ""}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const isRoot = () => process.getuid?.() === 0
/** Runs a PostgreSQL program as `postgres` when root (PostgreSQL will not run as root). */
const asPostgres = (file: string, args: ReadonlyArray<string>): [string, Array<string>] =>
  isRoot()
    ? [binary("runuser", "util-linux", ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"]), ["-u", "postgres", "--", file, ...args]]
    : [file, [...args]]

export interface Server {
  /** postgres://… or redis://… or http://… */
  readonly url: string
  readonly port: number
  readonly stop: () => Promise<void>
}

/** A server that can be stopped and started again on the same port with the same data: an outage. */
export interface RestartableServer extends Server {
  /** Stops the server (its clients see connections refused) and keeps its data. */
  readonly halt: () => Promise<void>
  /** Starts it again on the same port. */
  readonly resume: () => Promise<void>
}

/**
 * A private PostgreSQL cluster (C collation, UTF-8, trust authentication on loopback, fsync off).
 * `durable`: commits are in the WAL on disk before they are acknowledged (synchronous_commit on),
 * so a commit survives `halt` (an immediate stop, as a crash); off (the default, faster) a crash
 * loses the last commits, as PostgreSQL documents.
 */
export const startPostgres = async (options: { readonly durable?: boolean } = {}): Promise<RestartableServer> => {
  const initdb = pgBin("initdb")
  const pgCtl = pgBin("pg_ctl")
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-scale-pg-"))
  if (isRoot()) execFileSync("chown", ["postgres", dir])
  const data = path.join(dir, "data")
  const port = await freePort()
  const [i, iArgs] = asPostgres(initdb, ["-D", data, "-A", "trust", "-U", "gateway", "--locale=C", "-E", "UTF8"])
  execFileSync(i, iArgs, { stdio: "pipe" })
  const settings = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=${options.durable ? "on" : "off"} -c full_page_writes=off -c max_connections=300`
  const start = () => {
    const [c, cArgs] = asPostgres(pgCtl, ["-D", data, "-l", path.join(dir, "log"), "-o", settings, "-w", "-t", "60", "start"])
    try {
      execFileSync(c, cArgs, { stdio: "pipe" })
    } catch (e) {
      const log = fs.existsSync(path.join(dir, "log")) ? fs.readFileSync(path.join(dir, "log"), "utf8").slice(-2000) : ""
      throw new Error(`PostgreSQL did not start: ${(e as Error).message}\n${log}`)
    }
  }
  /** `immediate`: the server's processes are stopped at once, as a crash or an outage would. */
  const halt = () => {
    const [s, sArgs] = asPostgres(pgCtl, ["-D", data, "-m", "immediate", "-w", "stop"])
    try {
      execFileSync(s, sArgs, { stdio: "pipe" })
    } catch {
      // already gone
    }
  }
  start()
  return {
    url: `postgres://gateway@127.0.0.1:${port}/postgres`,
    port,
    halt: async () => halt(),
    resume: async () => start(),
    stop: async () => {
      halt()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

const spawned = async (what: string, file: string, args: ReadonlyArray<string>, port: number, scheme: string): Promise<Server> => {
  let output = ""
  const child = spawn(file, [...args], { stdio: ["ignore", "pipe", "pipe"] })
  child.stdout!.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-4000)))
  child.stderr!.on("data", (d: Buffer) => (output = (output + d.toString()).slice(-4000)))
  await waitForPort(port, what, child, () => output)
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        child.once("exit", () => resolve())
        child.kill("SIGTERM")
        setTimeout(() => child.kill("SIGKILL"), 5000).unref()
      })
  }
}

/** A Redis server that keeps nothing on disk. */
export const startRedis = async (): Promise<RestartableServer> => {
  const file = binary("redis-server", "redis-server", ["/usr/bin/redis-server", "/usr/local/bin/redis-server"])
  const port = await freePort()
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--protected-mode", "no"]
  let server = await spawned("redis-server", file, args, port, "redis")
  return {
    url: server.url,
    port,
    halt: () => server.stop(),
    resume: async () => {
      server = await spawned("redis-server", file, args, port, "redis")
    },
    stop: () => server.stop()
  }
}

/**
 * nginx in front of `upstreams` (host:port), round robin, HTTP/1.1 with keep-alive to the
 * upstreams, no buffering (streams pass as they come), a failed upstream tried on the next.
 */
export const startNginx = async (upstreams: ReadonlyArray<string>): Promise<Server> => {
  const file = binary("nginx", "nginx", ["/usr/sbin/nginx", "/usr/bin/nginx"])
  const port = await freePort()
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gw-scale-nginx-"))
  const conf = `
worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
${isRoot() ? "user root;" : ""}
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 64m;
  upstream gateways {
${upstreams.map((u) => `    server ${u};`).join("\n")}
    keepalive 16;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://gateways;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $remote_addr;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 120s;
      proxy_next_upstream error timeout;
    }
  }
}
`
  fs.writeFileSync(path.join(dir, "nginx.conf"), conf)
  const server = await spawned("nginx", file, ["-p", dir, "-c", path.join(dir, "nginx.conf")], port, "http")
  return {
    ...server,
    stop: async () => {
      await server.stop()
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** The environment variable the scale-out suite reads, or a failure naming it. */
export const required = (name: "GATEWAY_TEST_DATABASE_URL" | "GATEWAY_TEST_REDIS_URL"): string => {
  const v = process.env[name]
  if (!v)
    throw new Error(
      `${name} is not set: run the scale-out suite with \`npm run test:scale\`, which starts PostgreSQL and Redis and sets it`
    )
  return v
}

/** Runs one SQL statement with psql (PostgreSQL's client, from the postgresql package); answers its unaligned output. */
export const psql = (url: string, statement: string): string => {
  const file = binary("psql", "postgresql-client", ["/usr/bin/psql", "/usr/local/bin/psql"])
  return execFileSync(file, [url, "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", statement], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  }).trim()
}

/** A fresh database on the server of `maintenanceUrl` (C collation), and its URL. */
export const createDatabase = (
  maintenanceUrl: string,
  prefix: string
): { readonly name: string; readonly url: string; readonly drop: () => void } => {
  const name = `${prefix}_${Math.random().toString(16).slice(2, 10)}`
  psql(maintenanceUrl, `CREATE DATABASE ${name} TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`)
  const url = new URL(maintenanceUrl)
  url.pathname = `/${name}`
  return {
    name,
    url: url.toString(),
    drop: () => {
      try {
        psql(maintenanceUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      } catch {
        // the server is gone already
      }
    }
  }
}
