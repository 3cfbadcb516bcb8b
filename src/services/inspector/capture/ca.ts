/**
 * The inspector's local CA, kept per data directory, and leaf certificates issued from it per host on demand. node-forge (loaded
 * lazily) builds the X.509 structures; node's native crypto does every RSA operation (docs/inspector.md#the-local-ca).
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs/promises"
import * as net from "node:net"
import * as path from "node:path"
import * as tls from "node:tls"
import { promisify } from "node:util"
import type Forge from "node-forge"
import { BoundedMap } from "../../../kernel/BoundedMap.js"

/** A leaf certificate and its private key, both PEM. */
export interface LeafCert {
  readonly keyPem: string
  readonly certPem: string
}

export interface LocalCa {
  readonly dir: string
  /** The CA certificate, PEM (what clients trust). */
  readonly certPem: string
  /** SHA-256 of the certificate's DER, uppercase colon hex as `openssl x509 -fingerprint -sha256` prints it. */
  readonly fingerprint256: string
  /** A leaf for `host` (DNS name or IP literal), issued once and cached (LRU, `LEAF_CACHE_ENTRIES`). */
  readonly leafFor: (host: string) => Promise<LeafCert>
  /** A TLS context serving the leaf for `host`, for `SNICallback` and server-side `TLSSocket`s (cached like the leaves). */
  readonly secureContextFor: (host: string) => Promise<tls.SecureContext>
}

export const CA_COMMON_NAME = "Gateway Inspector Local CA"
export const CA_ORGANIZATION = "Gateway Traffic Inspector"
/** Leaves kept in memory; a client rarely talks to more hosts than this, and a miss costs one keygen (~100 ms off the event loop). */
export const LEAF_CACHE_ENTRIES = 500

const CA_FILE = "ca.pem"
const KEY_FILE = "ca-key.pem"
const DAY_MS = 24 * 60 * 60 * 1000

export const caPemPath = (dir: string): string => path.join(dir, CA_FILE)
export const caKeyPath = (dir: string): string => path.join(dir, KEY_FILE)

const generateKeyPair = promisify(crypto.generateKeyPair)

/** node-forge, set by the first `open` (everything below that uses it runs after one). */
let forge: typeof Forge
const loadForge = async (): Promise<void> => {
  forge ??= (await import("node-forge")).default
}

const newRsaKey = async (): Promise<crypto.KeyObject> =>
  (await generateKeyPair("rsa", { modulusLength: 2048, publicExponent: 0x10001 })).privateKey

/** A positive serial of 16 random bytes, first byte in 0x40..0x7f: DER-minimal and never negative (RFC 5280 §4.1.2.2). */
const randomSerial = (): string => {
  const bytes = crypto.randomBytes(16)
  bytes[0] = (bytes[0]! & 0x3f) | 0x40
  return bytes.toString("hex")
}

const forgePublicKey = (key: crypto.KeyObject): Forge.pki.PublicKey =>
  forge.pki.publicKeyFromPem(crypto.createPublicKey(key).export({ type: "spki", format: "pem" }).toString())

const keyPem = (key: crypto.KeyObject): string => key.export({ type: "pkcs8", format: "pem" }).toString()

/** `getTBSCertificate` exists in node-forge but not in its type declarations. */
const tbsOf = (cert: Forge.pki.Certificate): Forge.asn1.Asn1 =>
  (forge.pki as unknown as { getTBSCertificate: (c: Forge.pki.Certificate) => Forge.asn1.Asn1 }).getTBSCertificate(cert)

/** What forge's `cert.sign(key, sha256)` does, with node's native RSA in place of forge's JavaScript one. */
const signSha256 = (cert: Forge.pki.Certificate, signer: crypto.KeyObject): void => {
  const sha256Rsa = forge.pki.oids["sha256WithRSAEncryption"]!
  cert.signatureOid = sha256Rsa
  cert.siginfo.algorithmOid = sha256Rsa
  cert.tbsCertificate = tbsOf(cert)
  const der = Buffer.from(forge.asn1.toDer(cert.tbsCertificate).getBytes(), "binary")
  cert.signature = crypto.sign("sha256", der, signer).toString("binary")
}

const caSubject: Array<Forge.pki.CertificateField> = [
  { name: "commonName", value: CA_COMMON_NAME },
  { name: "organizationName", value: CA_ORGANIZATION }
]

const createCaCert = (key: crypto.KeyObject): string => {
  const cert = forge.pki.createCertificate()
  cert.publicKey = forgePublicKey(key)
  cert.serialNumber = randomSerial()
  // Backdated a day: a client whose clock runs a little behind still accepts it.
  const now = Date.now()
  cert.validity.notBefore = new Date(now - DAY_MS)
  cert.validity.notAfter = new Date(now + 3650 * DAY_MS)
  cert.setSubject(caSubject)
  cert.setIssuer(caSubject)
  cert.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" }
  ])
  signSha256(cert, key)
  return forge.pki.certificateToPem(cert)
}

/** `host` as a certificate names it: lowercase, no trailing dot, no IPv6 brackets. Refuses what is neither a DNS name nor an IP. */
export const normalizeCertHost = (host: string): string => {
  let h = host.trim().toLowerCase()
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1)
  if (h.endsWith(".")) h = h.slice(0, -1)
  if (net.isIP(h) !== 0) return h
  if (
    h.length === 0 ||
    h.length > 253 ||
    !/^[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?$/.test(h) ||
    h.split(".").some((label) => label.length === 0 || label.length > 63)
  ) {
    throw new Error(`not a host name a certificate can be issued for: ${JSON.stringify(host.slice(0, 100))}`)
  }
  return h
}

const issueLeaf = async (host: string, caCert: Forge.pki.Certificate, caKey: crypto.KeyObject): Promise<LeafCert> => {
  const key = await newRsaKey()
  const cert = forge.pki.createCertificate()
  cert.publicKey = forgePublicKey(key)
  cert.serialNumber = randomSerial()
  const now = Date.now()
  cert.validity.notBefore = new Date(now - DAY_MS)
  cert.validity.notAfter = new Date(now + 365 * DAY_MS)
  // The common name is at most 64 characters (RFC 5280); clients only read the SAN anyway.
  cert.setSubject(host.length <= 64 ? [{ name: "commonName", value: host }] : [])
  cert.setIssuer(caCert.subject.attributes)
  const ip = net.isIP(host) !== 0
  cert.setExtensions([
    { name: "basicConstraints", cA: false },
    { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
    { name: "extKeyUsage", serverAuth: true },
    { name: "subjectAltName", altNames: [ip ? { type: 7, ip: host } : { type: 2, value: host }] },
    { name: "subjectKeyIdentifier" },
    { name: "authorityKeyIdentifier", keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() }
  ])
  signSha256(cert, caKey)
  return { keyPem: keyPem(key), certPem: forge.pki.certificateToPem(cert) }
}

/** Writes through a temporary file and a rename, so a crash never leaves half a PEM. */
const writeAtomic = async (file: string, content: string, mode: number): Promise<void> => {
  const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString("hex")}.tmp`
  try {
    await fs.writeFile(tmp, content, { mode })
    await fs.chmod(tmp, mode) // the umask may have narrowed (or, for the key, never widened) the mode
    await fs.rename(tmp, file)
  } catch (error) {
    await fs.rm(tmp, { force: true })
    throw error
  }
}

const readIfExists = async (file: string): Promise<string | undefined> => {
  try {
    return await fs.readFile(file, "utf8")
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw error
  }
}

const open = async (dir: string): Promise<LocalCa> => {
  await loadForge()
  await fs.mkdir(dir, { recursive: true, mode: 0o700 })
  await fs.chmod(dir, 0o700)
  let certPem = await readIfExists(caPemPath(dir))
  let keyText = await readIfExists(caKeyPath(dir))
  let key: crypto.KeyObject
  if (certPem !== undefined && keyText !== undefined) {
    key = crypto.createPrivateKey(keyText)
    // A certificate with someone else's key would issue leaves no client can verify: say so rather than replace a CA users may trust.
    if (!new crypto.X509Certificate(certPem).checkPrivateKey(key)) {
      throw new Error(`the inspector CA in ${dir} does not match its key: remove ${CA_FILE} and ${KEY_FILE} to create a new CA`)
    }
  } else {
    // Nothing (or half a pair, which cannot be used): a new CA. The key is written first, so a certificate on disk always has its key.
    key = await newRsaKey()
    keyText = keyPem(key)
    certPem = createCaCert(key)
    await writeAtomic(caKeyPath(dir), keyText, 0o600)
    await writeAtomic(caPemPath(dir), certPem, 0o644)
  }
  const caCert = forge.pki.certificateFromPem(certPem)
  const fingerprint256 = new crypto.X509Certificate(certPem).fingerprint256
  const leaves = new BoundedMap<string, Promise<LeafCert>>({ maxEntries: LEAF_CACHE_ENTRIES, order: "lru" })
  const contexts = new BoundedMap<string, Promise<tls.SecureContext>>({ maxEntries: LEAF_CACHE_ENTRIES, order: "lru" })

  const leafFor = (host: string): Promise<LeafCert> => {
    let h: string
    try {
      h = normalizeCertHost(host)
    } catch (error) {
      return Promise.reject(error)
    }
    const cached = leaves.get(h)
    if (cached !== undefined) return cached
    // The promise is cached at once: concurrent handshakes for one host share one keygen. A failure is not kept.
    const issued = issueLeaf(h, caCert, key)
    leaves.set(h, issued)
    issued.catch(() => leaves.peek(h) === issued && leaves.delete(h))
    return issued
  }

  const secureContextFor = (host: string): Promise<tls.SecureContext> => {
    let h: string
    try {
      h = normalizeCertHost(host)
    } catch (error) {
      return Promise.reject(error)
    }
    const cached = contexts.get(h)
    if (cached !== undefined) return cached
    const made = leafFor(h).then((leaf) => tls.createSecureContext({ key: leaf.keyPem, cert: leaf.certPem }))
    contexts.set(h, made)
    made.catch(() => contexts.peek(h) === made && contexts.delete(h))
    return made
  }

  return { dir, certPem, fingerprint256, leafFor, secureContextFor }
}

const opened = new Map<string, Promise<LocalCa>>()

/**
 * The CA of `dir`, created on first use. Callers in one process share one promise per directory,
 * so two capture modes starting together never create two CAs; a failure (a read-only disk) is
 * not remembered, the next call tries again.
 */
export const loadOrCreateCa = (dir: string): Promise<LocalCa> => {
  const key = path.resolve(dir)
  const existing = opened.get(key)
  if (existing !== undefined) return existing
  const promise = open(key)
  opened.set(key, promise)
  promise.catch(() => opened.get(key) === promise && opened.delete(key))
  return promise
}
