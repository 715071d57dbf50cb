/* debuginfod.c — fetching separate debug files from debuginfod servers (libcurl).
 *
 * When DEBUGINFOD_URLS is set (space-separated base URLs), GET URL/buildid/HEX/debuginfo
 * from each server in turn into the client cache ($DEBUGINFOD_CACHE_PATH, else
 * $XDG_CACHE_HOME/debuginfod_client, else $HOME/.cache/debuginfod_client), at
 * CACHE/HEX/debuginfo, the layout elfutils' client uses, so both share downloads.
 * Only http and https are followed; a download is bounded in size and time
 * ($DEBUGINFOD_TIMEOUT seconds, default 30) and written with common's atomic writer
 * (cn_afile: a temporary file of its own, renamed into place only when complete), so two
 * loads of one build-id at once never write into one file. The caller checks the file's
 * build-id. */
#include "sym_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEBUGINFO_BYTES (2LL << 30)

static int cache_dir(char *buf, size_t size)
{
    const char *p = getenv("DEBUGINFOD_CACHE_PATH");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (p && p[0])
        n = snprintf(buf, size, "%s", p);
    else if (xdg && xdg[0])
        n = snprintf(buf, size, "%s/debuginfod_client", xdg);
    else if (home && home[0])
        n = snprintf(buf, size, "%s/.cache/debuginfod_client", home);
    else
        return -ENOENT;
    return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static int mkdirs(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        int rc = mkdir(path, 0700);
        *s = '/';
        if (rc < 0 && errno != EEXIST)
            return -errno;
    }
    if (mkdir(path, 0700) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static size_t write_cb(char *data, size_t size, size_t n, void *arg)
{
    return fwrite(data, size, n, (FILE *)arg);
}

/* One download attempt into f; 0 when the server answered 200 with a body. */
static int fetch(const char *url, FILE *f)
{
    CURL *curl = curl_easy_init();
    int rc = -ENOENT;
    if (!curl)
        return -ENOMEM;
    const char *t = getenv("DEBUGINFOD_TIMEOUT");
    long timeout = t && atol(t) > 0 ? atol(t) : 30;
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, f);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 4L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)MAX_DEBUGINFO_BYTES);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    CURLcode res = curl_easy_perform(curl);
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    if (res == CURLE_OK && code == 200)
        rc = 0;
    curl_easy_cleanup(curl);
    return rc;
}

/* Downloads url into file atomically. 0 or negative errno (nothing left behind). */
static int fetch_into(const char *url, const char *file)
{
    cn_afile af;
    int rc = cn_afile_open(&af, file, 0600, NULL);
    if (rc < 0)
        return rc;
    FILE *f = cn_afile_stream(&af);
    rc = f ? fetch(url, f) : -ENOMEM;
    if (f && fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc < 0) {
        cn_afile_abort(&af);
        return rc;
    }
    return cn_afile_commit(&af, NULL);
}

int cn_sym__debuginfod_find(const char *build_id_hex, char **path)
{
    const char *urls = getenv("DEBUGINFOD_URLS");
    if (!urls || !urls[0] || strspn(build_id_hex, "0123456789abcdef") != strlen(build_id_hex))
        return -ENOENT;
    char dir[2048], file[2200], url[4096];
    int rc = cache_dir(dir, sizeof(dir));
    if (rc < 0)
        return rc;
    size_t dl = strlen(dir);
    snprintf(dir + dl, sizeof(dir) - dl, "/%s", build_id_hex);
    snprintf(file, sizeof(file), "%s/debuginfo", dir);
    struct stat st;
    if (stat(file, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        *path = strdup(file);
        return *path ? 0 : -ENOMEM;
    }
    rc = mkdirs(dir);
    if (rc < 0)
        return rc;
    rc = -ENOENT;
    for (const char *u = urls; *u;) {
        u += strspn(u, " \t");
        size_t ul = strcspn(u, " \t");
        if (ul == 0)
            break;
        size_t trim = ul;
        while (trim > 0 && u[trim - 1] == '/')
            trim--;
        snprintf(url, sizeof(url), "%.*s/buildid/%s/debuginfo", (int)trim, u, build_id_hex);
        u += ul;
        if (fetch_into(url, file) == 0) {
            rc = 0;
            break;
        }
    }
    if (rc < 0)
        return rc;
    *path = strdup(file);
    return *path ? 0 : -ENOMEM;
}
