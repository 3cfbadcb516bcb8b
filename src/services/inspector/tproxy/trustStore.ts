/**
 * The TPROXY CA in the OS trust store, in its own slot (`gateway-tproxy-ca.crt`), for Debian/Ubuntu or Fedora/RHEL/Arch; when not
 * root, through `sudo -S` with the password on standard input, never on a command line or in a log (docs/capture.md#what-it-needs).
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"

export const TRUST_SLOT = "gateway-tproxy-ca.crt"

export interface TrustStoreKind {
  /** The directory the slot is written to. */
  readonly dir: string
  /** The command that rebuilds the store from that directory. */
  readonly update: string
}

/** The stores this mode knows, in the order they are looked for. */
export const TRUST_STORES: ReadonlyArray<TrustStoreKind> = [
  { dir: "/usr/local/share/ca-certificates", update: "update-ca-certificates" },
  { dir: "/etc/pki/ca-trust/source/anchors", update: "update-ca-trust" }
]

/** How the trust store's commands run: `execRun` of rules.ts (the password for sudo on standard input). */
export type Exec = (
  command: string,
  args: ReadonlyArray<string>,
  input?: string
) => Promise<{ readonly code: number; readonly stdout: string; readonly stderr: string }>

export class TrustStoreError extends Error {
  constructor(
    message: string,
    readonly reason: "unsupported" | "permission" | "command"
  ) {
    super(message)
  }
}

const exists = (p: string) =>
  fs.access(p).then(
    () => true,
    () => false
  )

/** The store of this machine, if it is one this mode knows. */
export const findTrustStore = async (stores: ReadonlyArray<TrustStoreKind> = TRUST_STORES): Promise<TrustStoreKind | undefined> => {
  for (const s of stores) if (await exists(s.dir)) return s
  return undefined
}

export interface TrustStoreOptions {
  readonly exec: Exec
  /** Whether this process runs as root (then no sudo). */
  readonly root: boolean
  readonly sudoPassword?: string | undefined
  readonly stores?: ReadonlyArray<TrustStoreKind>
}

/** Runs `command` as root: itself when this process is root, else through `sudo -S` (the password on stdin). */
const asRoot = async (opts: TrustStoreOptions, command: string, args: ReadonlyArray<string>, input?: string): Promise<void> => {
  const r = opts.root
    ? await opts.exec(command, args, input)
    : opts.sudoPassword === undefined
      ? { code: 1, stdout: "", stderr: "not root and no sudoPassword given" }
      : await opts.exec("sudo", ["-S", "-p", "", command, ...args], `${opts.sudoPassword}\n${input ?? ""}`)
  if (r.code !== 0) {
    const why = r.stderr.trim().split("\n").slice(-2).join(" ")
    throw new TrustStoreError(
      `${command} ${args.join(" ")} failed (exit ${r.code}): ${why || "no message"}`,
      opts.root ? "command" : "permission"
    )
  }
}

/** Writes the CA to its slot and rebuilds the store. Returns the slot's path. */
export const installCa = async (pem: string, opts: TrustStoreOptions): Promise<string> => {
  const store = await findTrustStore(opts.stores)
  if (store === undefined)
    throw new TrustStoreError(
      `no known trust store on this system (looked for ${(opts.stores ?? TRUST_STORES).map((s) => s.dir).join(", ")}): trust the CA by hand (docs/capture.md)`,
      "unsupported"
    )
  const slot = path.join(store.dir, TRUST_SLOT)
  if (opts.root) await fs.writeFile(slot, pem, { mode: 0o644 })
  else await asRoot(opts, "tee", [slot], pem)
  await asRoot(opts, store.update, [])
  return slot
}

/** Removes the slot (wherever a known store has it) and rebuilds that store. Safe at any time: a slot not there is nothing to do. */
export const removeCa = async (opts: TrustStoreOptions): Promise<boolean> => {
  let removed = false
  for (const store of opts.stores ?? TRUST_STORES) {
    const slot = path.join(store.dir, TRUST_SLOT)
    if (!(await exists(slot))) continue
    if (opts.root) await fs.rm(slot, { force: true })
    else await asRoot(opts, "rm", ["-f", slot])
    await asRoot(opts, store.update, [])
    removed = true
  }
  return removed
}
