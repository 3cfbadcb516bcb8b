/**
 * Where installed plugins live and how they get there (docs/plugins.md, "Installing"): a folder
 * on the server, or a `.tgz` (what `npm pack` makes; its one top folder, `package/`, is taken
 * off), copied into `<DATA_DIR>/plugins/<name>/`. Nothing outside the target folder is ever
 * written: archive entries with absolute paths, `..`, links or devices are refused.
 */
import * as Either from "effect/Either"
import * as fs from "node:fs"
import * as path from "node:path"
import { Readable } from "node:stream"
import { pipeline } from "node:stream/promises"
import * as zlib from "node:zlib"
import { decodeManifest, type PluginManifest } from "./manifest.js"

export const PLUGINS_DIR = "plugins"
export const PLUGIN_DATA_DIR = "plugin-data"

/** A plugin's installed folder and its data folder (what `file-write` may write). */
export const pluginPaths = (dataDir: string, name: string) => ({
  dir: path.join(dataDir, PLUGINS_DIR, name),
  data: path.join(dataDir, PLUGIN_DATA_DIR, name)
})

export class InstallError extends Error {
  override readonly name = "InstallError"
}

/** The manifest of the plugin in `dir`, or why there is none. */
export const readManifest = (dir: string): PluginManifest => {
  const file = path.join(dir, "plugin.json")
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch {
    throw new InstallError(`${dir} has no plugin.json`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    throw new InstallError(`plugin.json is not JSON: ${(e as Error).message}`)
  }
  const decoded = decodeManifest(json)
  if (Either.isLeft(decoded)) {
    // Every problem at once: a missing entry file too.
    const main = typeof json === "object" && json !== null ? (json as { main?: unknown }).main : undefined
    const missing =
      typeof main === "string" && !main.startsWith("/") && !fs.existsSync(path.join(dir, main))
        ? `; main: ${main} does not exist in the plugin's folder`
        : ""
    throw new InstallError(`plugin.json: ${decoded.left}${missing}`)
  }
  const manifest = decoded.right
  if (!fs.existsSync(path.join(dir, manifest.main)))
    throw new InstallError(`plugin.json: main ${manifest.main} does not exist in the plugin's folder`)
  return manifest
}

/** Copies a plugin folder (its files and folders; links refused, `node_modules` and `.git` left out). */
export const copyPlugin = (from: string, to: string): void => {
  const st = fs.lstatSync(from)
  if (!st.isDirectory()) throw new InstallError(`${from} is not a folder`)
  fs.mkdirSync(to, { recursive: true })
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === ".git") continue
    const a = path.join(from, entry.name)
    const b = path.join(to, entry.name)
    if (entry.isDirectory()) copyPlugin(a, b)
    else if (entry.isFile()) fs.copyFileSync(a, b)
    else
      throw new InstallError(
        `${path.relative(from, a) || entry.name}: only files and folders can be installed (links and devices are refused)`
      )
  }
}

/** An archive entry's path inside the target, or why it is refused. */
const safeName = (name: string): string => {
  const normal = path.posix.normalize(name.replace(/\\/g, "/"))
  if (normal.startsWith("/") || normal === ".." || normal.startsWith("../") || normal.includes("\0"))
    throw new InstallError(`the archive's entry ${JSON.stringify(name)} points outside its folder`)
  return normal.replace(/\/$/, "")
}

/**
 * Extracts a gzipped tarball into `dir` (made empty first): files and folders only, at most
 * `maxBytes` unpacked. A single top folder (npm pack's `package/`) is taken off.
 */
export const extractTgz = async (bytes: Uint8Array, dir: string, maxBytes: number): Promise<void> => {
  if (bytes.length < 2 || bytes[0] !== 0x1f || bytes[1] !== 0x8b) throw new InstallError("the upload is not a .tgz (gzip) archive")
  const entries: Array<{ name: string; type: "file" | "directory"; data?: Buffer }> = []
  let total = 0
  const tar = (await import("tar-stream")).default
  const extract = tar.extract()
  extract.on("entry", (header, stream, next) => {
    let name: string
    try {
      name = safeName(header.name)
    } catch (e) {
      stream.resume()
      return extract.destroy(e as Error)
    }
    if (header.type === "directory") {
      entries.push({ name, type: "directory" })
      stream.resume()
      stream.on("end", () => next())
      return
    }
    if (header.type !== "file") {
      stream.resume()
      return extract.destroy(
        new InstallError(`the archive's entry ${JSON.stringify(header.name)} is a ${header.type}: only files and folders can be installed`)
      )
    }
    const chunks: Array<Buffer> = []
    stream.on("data", (c: Buffer) => {
      total += c.length
      if (total > maxBytes) extract.destroy(new InstallError(`the archive unpacks to more than ${Math.round(maxBytes / 1024 / 1024)} MB`))
      else chunks.push(c)
    })
    stream.on("end", () => {
      entries.push({ name, type: "file", data: Buffer.concat(chunks) })
      next()
    })
  })
  try {
    await pipeline(Readable.from([Buffer.from(bytes)]), zlib.createGunzip(), extract)
  } catch (e) {
    if (e instanceof InstallError) throw e
    throw new InstallError(`the archive cannot be read: ${(e as Error).message}`)
  }
  const names = entries.map((e) => e.name).filter((n) => n !== "." && n !== "")
  const tops = new Set(names.map((n) => n.split("/")[0]))
  const strip = tops.size === 1 && names.some((n) => n.includes("/")) && !names.includes("plugin.json") ? `${[...tops][0]}/` : ""
  fs.rmSync(dir, { recursive: true, force: true })
  fs.mkdirSync(dir, { recursive: true })
  for (const e of entries) {
    if (strip !== "" && !e.name.startsWith(strip)) continue
    const rel = e.name.slice(strip.length)
    if (rel === "" || rel === ".") continue
    const target = path.join(dir, rel)
    if (e.type === "directory") fs.mkdirSync(target, { recursive: true })
    else {
      fs.mkdirSync(path.dirname(target), { recursive: true })
      fs.writeFileSync(target, e.data!)
    }
  }
}
