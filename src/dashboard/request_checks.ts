/**
 * The checks an action request passes before it changes anything, besides
 * its CSRF token: it comes from a page of the dashboard's own origin, and its
 * body is a form or JSON (a `text/plain` body is what a cross-site form can
 * send without a preflight, so it is refused).
 *
 * @internal
 * @module
 */

/** The body types an action accepts. */
const ACCEPTED_BODIES = [
  "application/x-www-form-urlencoded",
  "multipart/form-data",
  "application/json",
];

/** Whether the request's body is a form or JSON; anything else (text/plain, none) is refused. */
export function acceptedBody(request: Request): boolean {
  const type = (request.headers.get("content-type") ?? "").split(";")[0]!.trim().toLowerCase();
  return ACCEPTED_BODIES.includes(type);
}

/**
 * Why the request does not come from the dashboard's own origin, or null
 * when it does. A browser says where a request comes from in `Sec-Fetch-Site`
 * and `Origin` (or at least `Referer`): each that is present must name this
 * host (compared by host and port, so a TLS proxy in front does not matter).
 * A request with none of them came from no browser, so no other site can
 * have sent it; its CSRF token is still checked.
 */
export function crossOriginReason(request: Request): string | null {
  const host = request.headers.get("host") ?? new URL(request.url).host;
  const site = request.headers.get("sec-fetch-site");
  if (site !== null && site !== "same-origin") {
    return `Sec-Fetch-Site is ${JSON.stringify(site)}, not "same-origin"`;
  }
  for (const header of ["origin", "referer"]) {
    const value = request.headers.get(header);
    if (value === null) continue;
    let from: string | null;
    try {
      from = value === "null" ? null : new URL(value).host;
    } catch {
      from = null;
    }
    if (from !== host) return `${header} ${JSON.stringify(value)} is not this dashboard's host`;
    return null; // Origin settles it; Referer only when there is no Origin
  }
  return null;
}
