// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

/**
 * What a user pastes into an MCP client to connect it as an agent: the
 * endpoint's URL, a JSON configuration (the `mcpServers` format of Claude
 * Code, Claude Desktop's bridges, Cursor and others) and Claude Code's
 * `claude mcp add` command line.
 */

import { URLExt } from '@jupyterlab/coreutils';
import type { ServerConnection } from '@jupyterlab/services';

import { URL_NAMESPACE } from '../tokens';

/**
 * The absolute URL of the MCP endpoint the agents connect to: below the
 * tool terminals' base URL (the page's server, or the JupyterHub service
 * in service mode), resolved against the page for a relative base URL.
 *
 * @param serverSettings - The tool terminals' server settings.
 * @param page - The page's URL (default: the window's).
 */
export function mcpUrl(
  serverSettings: ServerConnection.ISettings,
  page: string = window.location.href
): string {
  const path = URLExt.join(serverSettings.baseUrl, URL_NAMESPACE, 'mcp');
  return new URL(path, page).href;
}

/**
 * The JSON configuration of an MCP client for an agent, pretty-printed.
 *
 * @param name - The agent's name (the server's key in the client).
 * @param url - The MCP endpoint URL.
 * @param token - The agent's token.
 */
export function clientConfigJson(
  name: string,
  url: string,
  token: string
): string {
  const config = {
    mcpServers: {
      [name]: {
        type: 'http',
        url,
        headers: { Authorization: `Bearer ${token}` }
      }
    }
  };
  return JSON.stringify(config, null, 2);
}

/**
 * Claude Code's command line that adds the endpoint for an agent.
 *
 * @param name - The agent's name.
 * @param url - The MCP endpoint URL.
 * @param token - The agent's token.
 */
export function claudeCommand(
  name: string,
  url: string,
  token: string
): string {
  return [
    'claude mcp add --transport http',
    shellWord(name),
    shellWord(url),
    '--header',
    `"Authorization: Bearer ${token}"`
  ].join(' ');
}

/**
 * A word as a POSIX shell reads it back unchanged: as it is when it holds
 * only characters no shell treats specially, else in single quotes.
 *
 * @param word - Any text.
 */
export function shellWord(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) {
    return word;
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
