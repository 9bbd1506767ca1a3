/**
 * The headers every dashboard response carries, and the Content Security
 * Policy of its pages: scripts and styles only with the page's nonce (no
 * 'unsafe-inline'), nothing loaded from elsewhere, no framing.
 *
 * @internal
 * @module
 */

/** A fresh nonce for one page: 16 random bytes, base64. */
export function newNonce(): string {
  return crypto.getRandomValues(new Uint8Array(16)).toBase64();
}

/** The Content Security Policy of a page whose inline script and style carry `nonce`. */
export function contentSecurityPolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "connect-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** Headers of every response: no sniffing, no caching, no framing, no referrer outside. */
export function baseHeaders(contentType: string): Headers {
  return new Headers({
    "content-type": contentType,
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
  });
}

/** Headers of an HTML page: the base ones and its CSP. */
export function pageHeaders(nonce: string): Headers {
  const headers = baseHeaders("text/html; charset=utf-8");
  headers.set("content-security-policy", contentSecurityPolicy(nonce));
  return headers;
}
