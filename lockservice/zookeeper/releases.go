package zookeeper

import (
	"context"
	_ "embed"

	"github.com/zlockcheck/zlockcheck/internal/maven"
)

// releasesPOM pins the ZooKeeper releases a run can take from Maven Central
// (--zk-version), one profile per release: the one place a release is added.
//
//go:embed releases/pom.xml
var releasesPOM []byte

// releasesLock is the SHA-256 of every jar of each release (maven.Manifest.Lock).
//
//go:embed releases/pom.lock
var releasesLock []byte

// ReleasesManifest is the manifest of releases/pom.xml, with its lock file.
func ReleasesManifest() maven.Manifest {
	return maven.Manifest{Name: "zookeeper", POM: releasesPOM, Lock: releasesLock, LockFile: "lockservice/zookeeper/releases/pom.lock"}
}

// Releases are the versions --zk-version takes, oldest first.
func Releases() []string {
	ids, err := ReleasesManifest().Profiles()
	if err != nil {
		panic("lockservice/zookeeper: releases/pom.xml: " + err.Error()) // embedded; a test reads it
	}
	return ids
}

// FetchReleases fetches every release into the cache (make setup): a run then
// downloads nothing.
func FetchReleases(ctx context.Context, cfg maven.Config) error {
	for _, v := range Releases() {
		if _, err := maven.Fetch(ctx, cfg, ReleasesManifest(), v); err != nil {
			return err
		}
	}
	return nil
}

// fetchRelease is the directory of release v's jars (lib/*.jar), fetched into the
// cache (cacheDir: maven.CacheDir's override) on first use.
func fetchRelease(ctx context.Context, v, cacheDir string) (string, error) {
	dir, err := maven.CacheDir(cacheDir)
	if err != nil {
		return "", err
	}
	return maven.Fetch(ctx, maven.Config{CacheDir: dir}, ReleasesManifest(), v)
}
