/**
 * The responses the dashboard sends: pages, JSON, refusals and redirects,
 * each with the headers of `headers.ts`.
 *
 * @internal
 * @module
 */
import { baseHeaders, pageHeaders } from "./headers.ts";
import type { Html } from "./html.ts";

/** The CSP of responses that are not pages: nothing may run or load, nothing may frame them. */
const NOTHING_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'";

/** A page: its CSP allows only the inline script and style carrying `nonce`. */
export function pageResponse(
  page: Html,
  nonce: string,
  status = 200,
  setCookie: string | null = null,
): Response {
  const headers = pageHeaders(nonce);
  if (setCookie !== null) headers.set("set-cookie", setCookie);
  return new Response(page.text, { status, headers });
}

/** JSON (Dates as ISO strings). */
export function jsonResponse(body: unknown, status = 200): Response {
  const headers = baseHeaders("application/json; charset=utf-8");
  headers.set("content-security-policy", NOTHING_POLICY);
  return new Response(JSON.stringify(body), { status, headers });
}

/** Plain text, e.g. a refusal saying why; `extra` adds headers (`allow` on a 405). */
export function textResponse(
  text: string,
  status: number,
  extra: Record<string, string> = {},
): Response {
  const headers = baseHeaders("text/plain; charset=utf-8");
  headers.set("content-security-policy", NOTHING_POLICY);
  for (const [name, value] of Object.entries(extra)) headers.set(name, value);
  return new Response(`${text}\n`, { status, headers });
}

/** A static asset, e.g. the favicon. */
export function assetResponse(body: string, contentType: string): Response {
  const headers = baseHeaders(contentType);
  headers.set("content-security-policy", NOTHING_POLICY);
  headers.set("cache-control", "private, max-age=3600");
  return new Response(body, { headers });
}

/** A 303 to `location` (a path of the dashboard), after an action. */
export function seeOther(location: string): Response {
  const headers = baseHeaders("text/plain; charset=utf-8");
  headers.set("content-security-policy", NOTHING_POLICY);
  headers.set("location", location);
  return new Response(null, { status: 303, headers });
}
