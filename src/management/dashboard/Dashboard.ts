import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import type * as http from "node:http"
import path from "node:path"
import { brotliCompressSync, constants as zlib, gzipSync } from "node:zlib"
import { newRequestId } from "../../kernel/ids.js"
import { gatewayHeaders } from "../../inference/io.js"
import { PACKAGE_ROOT } from "../../kernel/packageRoot.js"

/** Where the dashboard is served (docs/dashboard.md). `/` stays the API's. */
export const DASHBOARD_PATH = "/dashboard"

/**
 * The dashboard's content-security policy: only its own scripts, styles and connections (the
 * live feed is a WebSocket to the same origin); no inline script or style, no frames, no
 * plugins, no CDN.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'"
].join("; ")

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
  ".txt": "text/plain; charset=utf-8"
}

interface Asset {
  readonly type: string
  readonly body: Buffer
  readonly compressible: boolean
  /** Compressed at its first request (not at start: start-up time matters more). */
  gzip?: Buffer
  br?: Buffer
  readonly etag: string
  readonly immutable: boolean
}

export interface DashboardShape {
  /** Serves GET/HEAD under /dashboard; false for any other path. */
  readonly handle: (req: http.IncomingMessage, res: http.ServerResponse, path: string) => boolean
}

const COMMON = {
  "content-security-policy": DASHBOARD_CSP,
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin"
}

/** Reads the built dashboard (dist/web) into memory. */
export const loadAssets = (dir: string): Map<string, Asset> => {
  const assets = new Map<string, Asset>()
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const full = path.join(d, name)
      if (statSync(full).isDirectory()) {
        walk(full)
        continue
      }
      const rel = "/" + path.relative(dir, full).split(path.sep).join("/")
      const body = readFileSync(full)
      const type = TYPES[path.extname(name)] ?? "application/octet-stream"
      const compressible = /^(text\/|application\/json|image\/svg)/.test(type) && body.length > 512
      assets.set(rel, {
        type,
        body,
        compressible,
        etag: `"${body.length.toString(36)}-${hash(body)}"`,
        // Vite names built assets by content hash: they never change under the same name.
        immutable: rel.startsWith("/assets/")
      })
    }
  }
  walk(dir)
  return assets
}

const hash = (b: Buffer): string => {
  let h = 2166136261
  for (let i = 0; i < b.length; i++) h = Math.imul(h ^ b[i]!, 16777619)
  return (h >>> 0).toString(36)
}

const send = (
  req: http.IncomingMessage,
  res: http.ServerResponse,
  status: number,
  headers: Record<string, string | number>,
  body: Buffer | string
) => {
  const requestId = newRequestId()
  res.writeHead(status, { ...gatewayHeaders(requestId), ...COMMON, ...headers, "content-length": Buffer.byteLength(body) })
  res.end(req.method === "HEAD" ? undefined : body)
}

const notBuilt = (dir: string) =>
  JSON.stringify({
    _tag: "NotBuilt",
    message: `the dashboard is not built (${dir} is missing): run \`npm run build\`; the management API works without it (GET /api/openapi.json)`
  })

/**
 * The dashboard's static files (a single-page app built by Vite from web/ into dist/web):
 * `/dashboard/assets/*` are content-hashed and cached for a year (immutable); every other path
 * below /dashboard is the app's index.html, never cached, so a new build is picked up at once.
 * Files are compressed once, at their first request (brotli, gzip), chosen by Accept-Encoding.
 */
export class Dashboard extends Context.Tag("gateway/Dashboard")<Dashboard, DashboardShape>() {
  static readonly layerFrom = (dir: string) =>
    Layer.sync(Dashboard, (): DashboardShape => {
      const built = existsSync(path.join(dir, "index.html"))
      // Read and hashed at the first request for a dashboard file, not at start: hashing the ~400 KB
      // byte by byte in JavaScript was one of a start's longest layers, and most gateways never serve the dashboard.
      let loaded: Map<string, Asset> | undefined
      const assetsNow = (): Map<string, Asset> | undefined => (built ? (loaded ??= loadAssets(dir)) : undefined)
      return {
        handle: (req, res, p) => {
          // A browser opening the gateway's root is sent to the dashboard; an API client asking
          // for `/` keeps the inference plane's JSON 404.
          if (p === "/") {
            if ((req.method !== "GET" && req.method !== "HEAD") || !String(req.headers["accept"] ?? "").includes("text/html")) return false
            req.resume()
            send(req, res, 302, { location: `${DASHBOARD_PATH}/`, "cache-control": "no-cache" }, "")
            return true
          }
          if (p !== DASHBOARD_PATH && !p.startsWith(`${DASHBOARD_PATH}/`)) return false
          req.resume()
          if (req.method !== "GET" && req.method !== "HEAD") {
            send(
              req,
              res,
              405,
              { allow: "GET, HEAD", "content-type": "application/json" },
              JSON.stringify({ _tag: "MethodNotAllowed", message: `${req.method} is not allowed on the dashboard's files` })
            )
            return true
          }
          const assets = assetsNow()
          if (!assets) {
            send(req, res, 503, { "content-type": "application/json", "cache-control": "no-store" }, notBuilt(dir))
            return true
          }
          if (p === DASHBOARD_PATH) {
            send(req, res, 308, { location: `${DASHBOARD_PATH}/`, "cache-control": "no-cache" }, "")
            return true
          }
          const rel = p.slice(DASHBOARD_PATH.length)
          let asset = assets.get(rel)
          if (!asset) {
            // A missing hashed asset is a 404 (an old page asking for a file of a previous build);
            // any other path is a page of the app.
            if (rel.startsWith("/assets/") || path.extname(rel) !== "") {
              send(
                req,
                res,
                404,
                { "content-type": "application/json", "cache-control": "no-store" },
                JSON.stringify({ _tag: "NotFound", message: `no dashboard file ${rel}` })
              )
              return true
            }
            asset = assets.get("/index.html")!
          }
          const cache = asset.immutable ? "public, max-age=31536000, immutable" : "no-cache"
          if (req.headers["if-none-match"] === asset.etag) {
            send(req, res, 304, { etag: asset.etag, "cache-control": cache }, "")
            return true
          }
          const accept = String(req.headers["accept-encoding"] ?? "")
          const [body, encoding] = !asset.compressible
            ? [asset.body, undefined]
            : /\bbr\b/.test(accept)
              ? [(asset.br ??= brotliCompressSync(asset.body, { params: { [zlib.BROTLI_PARAM_QUALITY]: 11 } })), "br"]
              : /\bgzip\b/.test(accept)
                ? [(asset.gzip ??= gzipSync(asset.body, { level: 9 })), "gzip"]
                : [asset.body, undefined]
          send(
            req,
            res,
            200,
            {
              "content-type": asset.type,
              "cache-control": cache,
              etag: asset.etag,
              vary: "accept-encoding",
              ...(encoding ? { "content-encoding": encoding } : {})
            },
            body
          )
          return true
        }
      }
    })

  static readonly layer = Dashboard.layerFrom(path.join(PACKAGE_ROOT, "dist/web"))
}
