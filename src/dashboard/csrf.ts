/**
 * CSRF tokens for the dashboard's actions, double-submit style and bound to
 * the process: the browser holds a random nonce in a `SameSite=Strict`,
 * `HttpOnly` cookie, and each form carries `HMAC-SHA256(secret, nonce)`,
 * where the secret is 32 random bytes made when the dashboard is created and
 * never leaves the process. An action must present both, and the token must
 * match the cookie's nonce: another site can neither read the token nor
 * make one for a nonce it set, and a restart (a new secret) voids old pages.
 *
 * @internal
 * @module
 */
import { timingSafeEqual } from "node:crypto";

/** The cookie holding the nonce. */
export const CSRF_COOKIE = "renox_queue_csrf";
/** The form field holding the token. */
export const CSRF_FIELD = "_csrf";
/** The header a script may send the token in instead. */
export const CSRF_HEADER = "x-csrf-token";

const NONCE = /^[A-Za-z0-9_-]{22}$/;
const encoder = new TextEncoder();

function base64url(bytes: Uint8Array): string {
  return bytes.toBase64({ alphabet: "base64url", omitPadding: true });
}

/** Makes and checks the tokens of one dashboard. */
export class CsrfTokens {
  readonly #key: Promise<CryptoKey>;

  /** A fresh random secret for this dashboard. */
  constructor() {
    const secret = crypto.getRandomValues(new Uint8Array(32));
    this.#key = crypto.subtle.importKey("raw", secret, { name: "HMAC", hash: "SHA-256" }, false, [
      "sign",
    ]);
  }

  /** A fresh nonce for a browser that has none: 16 random bytes, base64url. */
  static newNonce(): string {
    return base64url(crypto.getRandomValues(new Uint8Array(16)));
  }

  /** The nonce in the request's cookie, or null when it has none or a malformed one. */
  static nonceOf(request: Request): string | null {
    for (const part of (request.headers.get("cookie") ?? "").split(";")) {
      const [name, value] = part.trim().split("=", 2) as [string, string | undefined];
      if (name === CSRF_COOKIE && value !== undefined && NONCE.test(value)) return value;
    }
    return null;
  }

  /** The `Set-Cookie` value that gives a browser `nonce`, for the pages under `path`. */
  static cookie(nonce: string, path: string, secure: boolean): string {
    return `${CSRF_COOKIE}=${nonce}; Path=${path}; HttpOnly; SameSite=Strict${
      secure ? "; Secure" : ""
    }`;
  }

  /** The token forms carry for a browser holding `nonce`. */
  async token(nonce: string): Promise<string> {
    const mac = await crypto.subtle.sign("HMAC", await this.#key, encoder.encode(`csrf:${nonce}`));
    return base64url(new Uint8Array(mac));
  }

  /** Whether `token` was made by this dashboard for `nonce`; compared in constant time. */
  async verify(nonce: string | null, token: string | null): Promise<boolean> {
    if (nonce === null || token === null) return false;
    const expected = encoder.encode(await this.token(nonce));
    const given = encoder.encode(token);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}
