import * as crypto from "node:crypto"
import * as net from "node:net"
import forge from "node-forge"

/**
 * Certificates for TLS servers in tests, made with node-forge: a CA, and leaves it signs for
 * any name and any validity (a certificate for another name, an expired one), so a test can make
 * each check of a TLS client fail on its own while the chain itself is trusted. Keys are node's
 * (RSA 2048, generated natively); forge builds and signs the certificates.
 */
export interface TestCert {
  readonly certPem: string
  readonly keyPem: string
}

const DAY_MS = 24 * 60 * 60 * 1000

const newKey = (): { readonly pem: string; readonly forgeKey: forge.pki.rsa.PrivateKey; readonly forgePublic: forge.pki.rsa.PublicKey } => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 })
  const pem = privateKey.export({ type: "pkcs1", format: "pem" }).toString()
  return {
    pem,
    forgeKey: forge.pki.privateKeyFromPem(pem),
    forgePublic: forge.pki.publicKeyFromPem(publicKey.export({ type: "spki", format: "pem" }).toString())
  }
}

const serial = (): string => `4${crypto.randomBytes(15).toString("hex")}`

export interface TestCa extends TestCert {
  /**
   * A leaf for `names` (DNS names or IP addresses, as subjectAltName entries), valid from
   * `notBefore` to `notAfter` (default: from yesterday for a year).
   */
  readonly issue: (names: ReadonlyArray<string>, validity?: { readonly notBefore: Date; readonly notAfter: Date }) => TestCert
}

/** A CA of its own (CA:TRUE, keyCertSign), valid from yesterday for ten years. */
export const testCa = (commonName = "gateway test CA"): TestCa => {
  const key = newKey()
  const subject = [{ name: "commonName", value: commonName }]
  const ca = forge.pki.createCertificate()
  ca.publicKey = key.forgePublic
  ca.serialNumber = serial()
  ca.validity.notBefore = new Date(Date.now() - DAY_MS)
  ca.validity.notAfter = new Date(Date.now() + 3650 * DAY_MS)
  ca.setSubject(subject)
  ca.setIssuer(subject)
  ca.setExtensions([
    { name: "basicConstraints", cA: true, critical: true },
    { name: "keyUsage", keyCertSign: true, cRLSign: true, critical: true },
    { name: "subjectKeyIdentifier" }
  ])
  ca.sign(key.forgeKey, forge.md.sha256.create())
  const issue: TestCa["issue"] = (names, validity) => {
    const leafKey = newKey()
    const leaf = forge.pki.createCertificate()
    leaf.publicKey = leafKey.forgePublic
    leaf.serialNumber = serial()
    leaf.validity.notBefore = validity?.notBefore ?? new Date(Date.now() - DAY_MS)
    leaf.validity.notAfter = validity?.notAfter ?? new Date(Date.now() + 365 * DAY_MS)
    leaf.setSubject([{ name: "commonName", value: names[0] ?? "leaf" }])
    leaf.setIssuer(subject)
    leaf.setExtensions([
      { name: "basicConstraints", cA: false },
      { name: "keyUsage", digitalSignature: true, keyEncipherment: true, critical: true },
      { name: "extKeyUsage", serverAuth: true },
      { name: "subjectAltName", altNames: names.map((n) => (net.isIP(n) !== 0 ? { type: 7, ip: n } : { type: 2, value: n })) },
      { name: "authorityKeyIdentifier", keyIdentifier: ca.generateSubjectKeyIdentifier().getBytes() }
    ])
    leaf.sign(key.forgeKey, forge.md.sha256.create())
    return { certPem: forge.pki.certificateToPem(leaf), keyPem: leafKey.pem }
  }
  return { certPem: forge.pki.certificateToPem(ca), keyPem: key.pem, issue }
}
