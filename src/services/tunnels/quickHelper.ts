/**
 * The quick tunnel's helper binary, downloaded on first use and checksum-checked before it is made executable and
 * again before every start (docs/tunnels.md#quick-tunnel).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { HelperError } from "./supervisor.js"

const execFileAsync = promisify(execFile)

/**
 * The pinned release: its download per platform and the SHA-256 of each (where known). macOS
 * gets the vendor's amd64 archive (a .tgz holding `cloudflared`; on Apple silicon it runs under
 * Rosetta). Where no checksum is pinned, QUICK_TUNNEL_SHA256 must give it.
 */
export const QUICK_HELPER_VERSION = "2024.12.2"
const DARWIN = { file: "cloudflared-darwin-amd64.tgz", sha256: "71b17468bab0426b20959d4eeadfff3658d07c636beea472539e0781381559cc" }
const PINNED: Readonly<Record<string, { readonly file: string; readonly sha256?: string }>> = {
  "linux-x64": { file: "cloudflared-linux-amd64", sha256: "5237675a5e806120729acc78c5be02f9db5f406717699587abfa72b49b39fe40" },
  "linux-arm64": { file: "cloudflared-linux-arm64" },
  "linux-arm": { file: "cloudflared-linux-arm" },
  "darwin-x64": DARWIN,
  "darwin-arm64": DARWIN
}

/** How long the helper's download may take (it is ~40 MB). */
const DOWNLOAD_LIMIT_MS = 10 * 60_000

export interface HelperSettings {
  readonly dataDir: string
  readonly bin: string | undefined
  readonly downloadUrl: string | undefined
  readonly sha256: string | undefined
  readonly platform?: string
}

const sha256Of = (file: string): string => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex")
const platformOf = (s: HelperSettings) => s.platform ?? `${process.platform}-${process.arch}`

/** What the download must hash to: QUICK_TUNNEL_SHA256, else the pinned value for this platform. */
const expectedHash = (s: HelperSettings): string | undefined => s.sha256?.trim().toLowerCase() || PINNED[platformOf(s)]?.sha256

const defaultUrl = (s: HelperSettings): string | undefined => {
  const pinned = PINNED[platformOf(s)]
  return pinned ? `https://github.com/cloudflare/cloudflared/releases/download/${QUICK_HELPER_VERSION}/${pinned.file}` : undefined
}

/** A gzipped tar archive holding the helper (the vendor's macOS release), told by the URL's name. */
const isArchive = (url: string) => /\.(tgz|tar\.gz)(\?|$)/i.test(url)

/** Extracts `cloudflared` from the verified archive into place (a fresh copy each start). */
const extract = async (archive: string, target: string): Promise<void> => {
  const dir = fs.mkdtempSync(path.join(path.dirname(target), "extract-"))
  try {
    await execFileAsync("tar", ["-xzf", archive, "-C", dir])
    const found = [path.join(dir, "cloudflared"), ...fs.readdirSync(dir).map((f) => path.join(dir, f, "cloudflared"))].find((f) =>
      fs.existsSync(f)
    )
    if (!found) throw new HelperError(`the archive ${archive} holds no cloudflared`, true)
    fs.chmodSync(found, 0o755)
    fs.renameSync(found, target)
  } catch (e) {
    if (e instanceof HelperError) throw e
    throw new HelperError(`could not extract the quick-tunnel helper from ${archive}: ${(e as Error).message}`, true)
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/**
 * The helper's path, downloaded and checked when needed. What is checked is what was downloaded
 * (the binary, or the archive kept beside it), before every start.
 */
export const quickHelper = async (s: HelperSettings, signal?: AbortSignal): Promise<string> => {
  if (s.bin) {
    if (!fs.existsSync(s.bin)) throw new HelperError(`QUICK_TUNNEL_BIN ${s.bin} does not exist`, true)
    return s.bin
  }
  const expected = expectedHash(s)
  const url = s.downloadUrl?.trim() || defaultUrl(s)
  const target = path.join(s.dataDir, "tunnels", "cloudflared")
  const archive = url !== undefined && isArchive(url) ? `${target}.tgz` : undefined
  const download = archive ?? target
  if (fs.existsSync(download)) {
    if (expected === undefined)
      throw new HelperError(`no SHA-256 is known for ${download} on this platform: set QUICK_TUNNEL_SHA256 (or QUICK_TUNNEL_BIN)`, true)
    const actual = sha256Of(download)
    if (actual !== expected) {
      fs.rmSync(download, { force: true })
      if (archive) fs.rmSync(target, { force: true })
      throw new HelperError(`${download} does not match its SHA-256 (expected ${expected}, found ${actual}): deleted, not run`, true)
    }
    if (archive) await extract(archive, target)
    return target
  }
  if (!url) throw new HelperError(`no quick-tunnel helper is published for ${process.platform}-${process.arch}: set QUICK_TUNNEL_BIN`, true)
  if (expected === undefined)
    throw new HelperError(
      `no SHA-256 is pinned for the helper on ${process.platform}-${process.arch}: set QUICK_TUNNEL_SHA256 to the release's checksum (or QUICK_TUNNEL_BIN)`,
      true
    )
  let res: Response
  try {
    // Ends with the tunnel (a disable, a shutdown) and after DOWNLOAD_LIMIT_MS at most.
    const limit = AbortSignal.timeout(DOWNLOAD_LIMIT_MS)
    res = await fetch(url, { redirect: "follow", signal: signal ? AbortSignal.any([signal, limit]) : limit })
  } catch (e) {
    throw new HelperError(`could not download the quick-tunnel helper from ${url}: ${(e as Error).message}`, false)
  }
  if (!res.ok) throw new HelperError(`could not download the quick-tunnel helper from ${url}: HTTP ${res.status}`, false)
  let bytes: Buffer
  try {
    bytes = Buffer.from(await res.arrayBuffer())
  } catch (e) {
    throw new HelperError(`could not download the quick-tunnel helper from ${url}: ${(e as Error).message}`, false)
  }
  const actual = crypto.createHash("sha256").update(bytes).digest("hex")
  // Checked before it touches the disk as a program: a mismatch is never written executable.
  if (actual !== expected)
    throw new HelperError(
      `the helper downloaded from ${url} does not match its SHA-256 (expected ${expected}, got ${actual}): deleted, never run`,
      true
    )
  fs.mkdirSync(path.dirname(target), { recursive: true })
  const partial = `${download}.partial-${process.pid}`
  fs.writeFileSync(partial, bytes, { mode: archive ? 0o644 : 0o755 })
  fs.renameSync(partial, download)
  if (archive) await extract(archive, target)
  return target
}
