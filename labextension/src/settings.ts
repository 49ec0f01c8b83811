// Copyright (c) jupyter-tool-terminal developers.
// Distributed under the terms of the Modified BSD License.

import { PageConfig, URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';
import type { ISettingRegistry } from '@jupyterlab/settingregistry';
import type { ITerminal } from '@jupyterlab/terminal';

import { serviceFetch, serviceLogin } from './login';
import type { FetchFunction, IServiceLogin } from './login';
import { TERMINAL_SETTINGS_PLUGIN } from './tokens';

/**
 * The page-config option carrying `ToolTerminalApp.service_url`: the URL of
 * the JupyterHub tool-terminal service that serves this user's tool terminals.
 */
export const SERVICE_URL_OPTION = 'toolTerminalServiceUrl';

/**
 * Settings that point at a JupyterHub tool-terminal service, with how to log
 * in there.
 */
const serviceSettings = new WeakMap<
  ServerConnection.ISettings,
  () => Promise<IServiceLogin>
>();

/**
 * The server settings of the tool terminals.
 *
 * Without a `service_url` these are the page's own server settings. With
 * one, REST calls and WebSockets go to the service, on the same origin
 * behind the Hub's proxy, authenticated by the service's own login cookie
 * (got through the service's OAuth flow with the Hub, see
 * {@link serviceLogin}) and, for REST calls, the service's XSRF token. The
 * page's own token is never sent there: it belongs to the user's server,
 * and the service refuses it.
 *
 * @param base - The page's own server settings.
 * @param serviceUrl - The service URL (default: from the page config).
 * @returns The settings the tool terminals use.
 */
export function toolTerminalSettings(
  base: ServerConnection.ISettings,
  serviceUrl: string = PageConfig.getOption(SERVICE_URL_OPTION)
): ServerConnection.ISettings {
  if (!serviceUrl) {
    return base;
  }
  const baseUrl = URLExt.normalize(
    serviceUrl.endsWith('/') ? serviceUrl : `${serviceUrl}/`
  );
  const pageFetch = base.fetch as FetchFunction;
  const settings = ServerConnection.makeSettings({
    ...base,
    baseUrl,
    wsUrl: baseUrl.replace(/^http/, 'ws'),
    token: '',
    appendToken: false,
    fetch: serviceFetch(baseUrl, pageFetch) as typeof fetch
  });
  serviceSettings.set(settings, () => serviceLogin(baseUrl));
  return settings;
}

/**
 * Whether settings point at a JupyterHub tool-terminal service, whose
 * WebSockets need its login cookie first.
 *
 * @param settings - Server settings.
 * @returns `true` for settings made by {@link toolTerminalSettings} from a
 *   service URL.
 */
export function isServiceSettings(
  settings: ServerConnection.ISettings
): boolean {
  return serviceSettings.has(settings);
}

/**
 * Make sure the browser is logged in at the service the settings point at
 * (nothing to do for the page's own server).
 *
 * @param settings - The tool terminals' server settings.
 */
export async function ensureServiceLogin(
  settings: ServerConnection.ISettings
): Promise<void> {
  const login = serviceSettings.get(settings);
  if (login !== undefined) {
    await login();
  }
}

/**
 * The extension's own settings (`schema/plugin.json`), as the panels use
 * them.
 */
export interface IToolTerminalPreferences {
  /**
   * What closing a tab does: as JupyterLab's "Shut down on close" says,
   * detach, or shut the session down.
   */
  closeAction: 'follow-terminal-settings' | 'detach' | 'shut-down';

  /**
   * Whether a tab closes when its shell exits by itself.
   */
  closeOnExit: 'follow-terminal-settings' | 'close' | 'keep-open';

  /**
   * The palette: the Terminal settings' theme, or one of its own.
   */
  theme: 'follow-terminal-settings' | ITerminal.Theme;

  /**
   * Whether programs in the user's own terminals may write the clipboard
   * (OSC 52).
   */
  osc52Copy: boolean;
}

/**
 * The defaults of {@link IToolTerminalPreferences} (those of the schema).
 */
export const DEFAULT_PREFERENCES: IToolTerminalPreferences = {
  closeAction: 'follow-terminal-settings',
  closeOnExit: 'follow-terminal-settings',
  theme: 'follow-terminal-settings',
  osc52Copy: true
};

/**
 * JupyterLab's own defaults for the terminal options a tool terminal reads
 * when its settings cannot be loaded (the terminal extension disabled).
 */
const LAB_DEFAULTS: Partial<ITerminal.IOptions> = {
  shutdownOnClose: false,
  closeOnExit: true,
  theme: 'inherit'
};

/**
 * The terminal options of a tool terminal: the user's JupyterLab terminal
 * settings, with the extension's own settings over them where they do not
 * say "as the Terminal settings say".
 *
 * @param lab - The JupyterLab terminal settings (composite).
 * @param own - The extension's settings.
 * @returns The options a tool terminal follows.
 */
export function effectiveOptions(
  lab: Partial<ITerminal.IOptions>,
  own: IToolTerminalPreferences
): Partial<ITerminal.IOptions> {
  const options: Partial<ITerminal.IOptions> = { ...LAB_DEFAULTS, ...lab };
  if (own.closeAction !== 'follow-terminal-settings') {
    options.shutdownOnClose = own.closeAction === 'shut-down';
  }
  if (own.closeOnExit !== 'follow-terminal-settings') {
    options.closeOnExit = own.closeOnExit === 'close';
  }
  if (own.theme !== 'follow-terminal-settings') {
    options.theme = own.theme;
  }
  return options;
}

/**
 * Follow the user's JupyterLab terminal settings (font, theme, scrollback,
 * screen reader mode, closing...) and the extension's own settings in the
 * tool terminals, now and when they change.
 *
 * @param settingRegistry - The setting registry.
 * @param ownPlugin - The id of the plugin whose schema holds the
 *   extension's settings.
 * @param options - The options new terminals get: every option is set in
 *   it, in place.
 * @param preferences - The extension's settings: set in it, in place.
 * @param changed - Called with each option, to apply it to the open
 *   terminals.
 */
export function followTerminalSettings(
  settingRegistry: ISettingRegistry,
  ownPlugin: string | null,
  options: Partial<ITerminal.IOptions>,
  preferences: IToolTerminalPreferences,
  changed: <K extends keyof ITerminal.IOptions>(
    key: K,
    value: ITerminal.IOptions[K]
  ) => void
): void {
  let lab: Partial<ITerminal.IOptions> = {};
  const apply = (): void => {
    const effective = effectiveOptions(lab, preferences);
    for (const key of Object.keys(effective) as Array<
      keyof ITerminal.IOptions
    >) {
      const value = effective[key];
      if (value === undefined) {
        continue;
      }
      (options as Record<string, unknown>)[key] = value;
      changed(key, value);
    }
  };
  apply();
  settingRegistry
    .load(TERMINAL_SETTINGS_PLUGIN)
    .then(settings => {
      const read = () => {
        lab = settings.composite as Partial<ITerminal.IOptions>;
        apply();
      };
      read();
      settings.changed.connect(read);
    })
    .catch(() => {
      // JupyterLab's terminal extension is disabled: use its defaults.
    });
  if (ownPlugin === null) {
    return;
  }
  settingRegistry
    .load(ownPlugin)
    .then(settings => {
      const read = () => {
        Object.assign(
          preferences,
          DEFAULT_PREFERENCES,
          settings.composite as Partial<IToolTerminalPreferences>
        );
        apply();
      };
      read();
      settings.changed.connect(read);
    })
    .catch(() => {
      // No schema (an older build): the defaults hold.
    });
}
